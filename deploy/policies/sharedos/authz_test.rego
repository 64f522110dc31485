package sharedos.authz_test

import rego.v1

import data.sharedos.authz

engineer := {"principal": "alice", "tenant": "acme", "roles": ["engineer"], "attributes": {}}

admin := {"principal": "root", "tenant": "acme", "roles": ["admin"], "attributes": {}}

nobody := {"principal": "eve", "tenant": "acme", "roles": [], "attributes": {}}

# call is a file call on an already clean path; input.file is what
# authz-svc derives from the resource (for unclean paths — traversal,
# backslashes, encoded or look-alike separators — the Go test
# TestExamplePolicyOnRawPaths in authz-svc/internal/pdp sends the raw
# resource through authz-svc's own input building).
call(ctx, tool, action, path) := {
	"context": ctx,
	"tool": {"name": tool, "namespace": "files", "class": "managed", "annotations": {}, "source": "provider:files"},
	"action": action,
	"resource": concat("", ["file:", path]),
	"arguments": {"path": path},
	"file": {"path": path, "absolute": startswith(path, "/"), "suspicious": false},
}

listing(ctx, tool) := {
	"context": ctx,
	"tool": {"name": tool, "namespace": "files", "class": "managed", "annotations": {}, "source": "provider:files"},
	"action": "list",
	"resource": "",
	"arguments": {},
}

allowed(req) if authz.decision.allow with input as req

test_engineer_sees_read_and_search if {
	allowed(listing(engineer, "files.read"))
	allowed(listing(engineer, "files.search"))
	not allowed(listing(engineer, "files.write"))
}

test_admin_sees_write if {
	allowed(listing(admin, "files.read"))
	allowed(listing(admin, "files.search"))
	allowed(listing(admin, "files.write"))
}

test_no_roles_sees_nothing if {
	not allowed(listing(nobody, "files.read"))
	not allowed(listing(nobody, "files.search"))
	authz.decision.reason == "principal has no roles" with input as listing(nobody, "files.read")
}

test_unknown_tool_hidden if {
	not allowed(listing(admin, "github.search"))
}

test_engineer_reads_public if {
	allowed(call(engineer, "files.read", "read", "/public/a.txt"))
	allowed(call(engineer, "files.search", "search", "/public"))
}

test_engineer_denied_private_with_safe_reason if {
	req := call(engineer, "files.read", "read", "/private/a.txt")
	not allowed(req)
	authz.decision.reason == "role engineer may not read /private/a.txt" with input as req
}

test_engineer_cannot_write if {
	not allowed(call(engineer, "files.write", "write", "/public/a.txt"))
}

test_admin_reads_and_writes_private if {
	allowed(call(admin, "files.read", "read", "/private/a.txt"))
	allowed(call(admin, "files.write", "write", "/private/b.txt"))
	allowed(call(admin, "files.write", "write", "/public/b.txt"))
}

test_no_roles_may_do_nothing if {
	not allowed(call(nobody, "files.read", "read", "/public/a.txt"))
}

test_file_facts_decide if {
	# authz-svc cleaned /public/../private/a.txt to /private/a.txt.
	traversal := object.union(call(engineer, "files.read", "read", "/public/../private/a.txt"), {"file": {"path": "/private/a.txt", "absolute": true, "suspicious": false}})
	not allowed(traversal)
	authz.decision.reason == "role engineer may not read /private/a.txt" with input as traversal
	suspicious := object.union(call(admin, "files.read", "read", "/public/%2e%2e/private/a.txt"), {"file": {"path": "/public/%2e%2e/private/a.txt", "absolute": true, "suspicious": true}})
	not allowed(suspicious)
	startswith(authz.decision.reason, "path refused: it contains") with input as suspicious
	not allowed(call(admin, "files.read", "read", "private/a.txt"))
	authz.decision.reason == "path refused: it must be absolute" with input as call(admin, "files.read", "read", "private/a.txt")
}

test_file_without_facts_is_refused if {
	req := object.remove(call(admin, "files.read", "read", "/public/a.txt"), {"file"})
	not allowed(req)
}

test_prefix_collision if {
	not allowed(call(engineer, "files.read", "read", "/publicity/a.txt"))
	not allowed(call(engineer, "files.read", "read", "/public-other/a.txt"))
	not allowed(call(admin, "files.read", "read", "/privateer/a.txt"))
}

test_non_file_resource_refused if {
	req := object.union(call(admin, "files.read", "read", "/public/a.txt"), {"resource": "url:https://example.com"})
	not allowed(req)
}

test_annotations_are_not_authority if {
	base := call(engineer, "files.write", "write", "/private/a.txt")
	req := object.union(base, {"tool": object.union(base.tool, {"annotations": {"sharedos.allow": true, "readOnlyHint": true}})})
	not allowed(req)
}

test_visible_agrees_with_decision if {
	tools := ["files.read", "files.search", "files.write", "github.search"]
	every ctx in [engineer, admin, nobody, object.union(engineer, {"roles": ["engineer", "admin"]})] {
		vis := authz.visible with input as {"context": ctx, "tools": [{"name": t} | some t in tools], "action": "list"}
		every t in tools {
			shown := count({t} & vis) == 1
			allow_t := authz.decision.allow with input as listing(ctx, t)
			shown == allow_t
		}
	}
}

conformance_runner := {"principal": "ci", "tenant": "acme", "roles": ["conformance"], "attributes": {}}

fixture(ctx, action, resource) := {
	"context": ctx,
	"tool": {"name": "test_simple_text", "namespace": "", "class": "managed", "annotations": {}, "source": "conformance"},
	"action": action,
	"resource": resource,
	"arguments": {},
}

test_conformance_role_sees_and_calls_only_the_fixtures if {
	allowed(fixture(conformance_runner, "list", ""))
	allowed(fixture(conformance_runner, "call", "conformance:fixture"))
	not allowed(fixture(conformance_runner, "call", "conformance:other"))
	not allowed(fixture(conformance_runner, "read", "conformance:fixture"))
	not allowed(listing(conformance_runner, "files.read"))
	not allowed(call(conformance_runner, "files.read", "read", "/public/a.txt"))
}

test_engineer_may_not_call_the_fixtures if {
	not allowed(fixture(engineer, "list", ""))
	not allowed(fixture(engineer, "call", "conformance:fixture"))
}

entry(ctx, class, name, action, resource) := {
	"context": ctx,
	"tool": {"name": name, "namespace": "", "class": class, "annotations": {}, "source": "conformance"},
	"action": action,
	"resource": resource,
	"arguments": {},
}

test_prompts_and_resources_by_role if {
	allowed(entry(conformance_runner, "prompt", "test_simple_prompt", "list", ""))
	allowed(entry(conformance_runner, "prompt", "test_simple_prompt", "get", "prompt:test_simple_prompt"))
	not allowed(entry(conformance_runner, "prompt", "test_simple_prompt", "read", "prompt:test_simple_prompt"))
	not allowed(entry(conformance_runner, "prompt", "other_prompt", "get", "prompt:other_prompt"))
	allowed(entry(conformance_runner, "resource", "test://template/{id}/data", "read", "resource:test://template/7/data"))
	not allowed(entry(conformance_runner, "resource", "test://static-text", "get", "resource:test://static-text"))
	not allowed(entry(engineer, "resource", "test://static-text", "read", "resource:test://static-text"))
	# A prompt does not borrow a tool's visibility, nor a tool a prompt's.
	not allowed(entry(engineer, "prompt", "files.read", "get", "prompt:files.read"))
	not allowed(listing(conformance_runner, "test_simple_prompt"))
}

test_visible_agrees_with_decision_for_entries if {
	entries := [{"class": "prompt", "name": "test_simple_prompt"}, {"class": "prompt", "name": "files.read"},
		{"class": "resource", "name": "test://static-text"}, {"class": "resource", "name": "test://nope"}]
	every ctx in [engineer, conformance_runner, nobody] {
		vis := authz.visible with input as {"context": ctx, "tools": entries, "action": "list"}
		every e in entries {
			shown := count({e.name} & vis) == 1
			allow_e := authz.decision.allow with input as entry(ctx, e.class, e.name, "list", "")
			shown == allow_e
		}
	}
}

integrator := {"principal": "ivy", "tenant": "acme", "roles": ["integrator"], "attributes": {}}

upstream_call(ctx, tool, action, resource) := {
	"context": ctx,
	"tool": {"name": tool, "namespace": "everything", "class": "managed", "annotations": {"readOnlyHint": true}, "source": "mcp:everything"},
	"action": action,
	"resource": resource,
	"arguments": {},
}

test_integrator_sees_and_calls_every_everything_tool if {
	allowed(upstream_call(integrator, "everything.echo", "list", ""))
	allowed(upstream_call(integrator, "everything.echo", "call", "mcp:everything/echo"))
	# The resource must be the tool's own default one, not another tool's.
	not allowed(upstream_call(integrator, "everything.echo", "call", "mcp:everything/get-env"))
	not allowed(upstream_call(integrator, "everything.echo", "read", "mcp:everything/echo"))
	not allowed(upstream_call(integrator, "everythingelse.echo", "list", ""))
	not allowed(upstream_call(engineer, "everything.echo", "list", ""))
	not allowed(listing(integrator, "files.read"))
}

test_visible_agrees_with_decision_for_upstreams if {
	tools := [{"name": "everything.echo", "class": "managed"}, {"name": "everythingelse.echo", "class": "managed"}, {"name": "files.read", "class": "managed"}]
	every ctx in [engineer, integrator, nobody] {
		vis := authz.visible with input as {"context": ctx, "tools": tools, "action": "list"}
		every t in tools {
			shown := count({t.name} & vis) == 1
			shown == authz.decision.allow with input as upstream_call(ctx, t.name, "list", "")
		}
	}
}

upstream_entry(ctx, class, name, action, resource, source) := {
	"context": ctx,
	"tool": {"name": name, "namespace": "everything", "class": class, "annotations": {}, "source": source},
	"action": action,
	"resource": resource,
	"arguments": {},
}

test_integrator_gets_everything_prompts_and_resources if {
	allowed(upstream_entry(integrator, "prompt", "everything.simple-prompt", "get", "prompt:everything.simple-prompt", "mcp:everything"))
	allowed(upstream_entry(integrator, "resource", "demo://resource/1", "read", "resource:demo://resource/1", "mcp:everything"))
	not allowed(upstream_entry(integrator, "resource", "demo://resource/1", "read", "resource:demo://resource/1", "mcp:other"))
	not allowed(upstream_entry(engineer, "prompt", "everything.simple-prompt", "get", "prompt:everything.simple-prompt", "mcp:everything"))
	vis := authz.visible with input as {"context": integrator, "action": "list", "tools": [
		{"name": "demo://resource/1", "class": "resource", "source": "mcp:everything"},
		{"name": "demo://resource/2", "class": "resource", "source": "mcp:other"},
	]}
	vis == {"demo://resource/1"}
}
