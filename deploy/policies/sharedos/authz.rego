# Example SharedOS policy (contract: authz-svc/internal/pdp package doc and
# docs/authz-input.md).
#
# data.sharedos.roles.<role>.tools    lists the tools the role may see;
# data.sharedos.roles.<role>.grants   maps an action to the directory roots
#                                     the role may apply it to;
# data.sharedos.roles.<role>.resources maps an action to exact non-file
#                                     resources the role may apply it to
#                                     (the conformance fixtures' one);
# data.sharedos.roles.<role>.prompts   lists the prompts the role may list
#                                     and get;
# data.sharedos.roles.<role>.resource_uris lists the resource registrations
#                                     (URIs or URI templates) the role may
#                                     list and read (ADR 0018);
# data.sharedos.roles.<role>.namespaces lists upstream MCP servers (ADR 0019)
#                                     whose every tool the role may see and
#                                     call on its default requirement
#                                     (resource mcp:<namespace>/<tool>), and
#                                     whose prompts and resources it may list,
#                                     get and read (by source mcp:<ns>).
#
# A call is allowed when the tool is visible to one of the principal's roles
# and, for any action but "list", the resource is a file whose cleaned path
# lies under a root granted for that action. The path facts come from
# input.file, which authz-svc derives itself from the raw resource string
# (docs/authz-input.md): the caller's own cleaning is not trusted, and the
# policy keeps every check — suspicious, absolute, under a granted root.
package sharedos.authz

import rego.v1

default decision := {"allow": false, "reason": "no policy rule allows this request"}

decision := {"allow": false, "reason": "principal has no roles"} if {
	count(input.context.roles) == 0
} else := {"allow": false, "reason": sprintf("%s %s is not available to %s", [input.tool.class, input.tool.name, role_label])} if {
	input.tool.class in entry_classes
	not entry_visible
} else := {"allow": true, "reason": sprintf("%s %s is available to %s", [input.tool.class, input.tool.name, role_label])} if {
	input.tool.class in entry_classes
	input.action in entry_actions[input.tool.class]
} else := {"allow": false, "reason": sprintf("%s may not %s a %s", [role_label, input.action, input.tool.class])} if {
	input.tool.class in entry_classes
} else := {"allow": false, "reason": sprintf("tool %s is not available to %s", [input.tool.name, role_label])} if {
	not tool_visible
} else := {"allow": true, "reason": sprintf("tool %s is available to %s", [input.tool.name, role_label])} if {
	input.action == "list"
} else := {"allow": true, "reason": sprintf("%s may %s %s", [role_label, input.action, input.resource])} if {
	resource_granted
} else := {"allow": false, "reason": sprintf("%s may not %s this resource: only file: resources are governed", [role_label, input.action])} if {
	not startswith(input.resource, "file:")
} else := {"allow": false, "reason": "path refused: it contains an encoded or look-alike separator, a NUL byte or too many segments"} if {
	input.file.suspicious
} else := {"allow": false, "reason": "path refused: it must be absolute"} if {
	not input.file.absolute
} else := {"allow": true, "reason": sprintf("%s may %s %s", [role_label, input.action, clean_path])} if {
	granted
} else := {"allow": false, "reason": sprintf("%s may not %s %s", [role_label, input.action, clean_path])}

# visible is the FilterTools shortcut: of input.tools, the names this
# context may list, in one evaluation instead of one decision per tool. It
# must agree with decision for action "list" (authz_test.rego checks it).
visible contains name if {
	count(input.context.roles) > 0
	some t in input.tools
	not is_entry(t)
	name := t.name
	some role in input.context.roles
	name in data.sharedos.roles[role].tools
}

visible contains name if {
	count(input.context.roles) > 0
	some t in input.tools
	not is_entry(t)
	name := t.name
	some role in input.context.roles
	some ns in data.sharedos.roles[role].namespaces
	startswith(name, concat("", [ns, "."]))
}

visible contains name if {
	count(input.context.roles) > 0
	some t in input.tools
	is_entry(t)
	name := t.name
	some role in input.context.roles
	name in data.sharedos.roles[role][entry_lists[t.class]]
}

visible contains name if {
	count(input.context.roles) > 0
	some t in input.tools
	is_entry(t)
	name := t.name
	some role in input.context.roles
	some ns in data.sharedos.roles[role].namespaces
	t.source == concat("", ["mcp:", ns])
}

# Prompts and resources (ADR 0018): input.tool.class names the kind, and
# input.tool.name the prompt or the resource registration's URI (template).
# A role that may list one may get (prompt) or read (resource) it.
entry_classes := {"prompt", "resource"}

is_entry(t) if t.class in entry_classes

entry_lists := {"prompt": "prompts", "resource": "resource_uris"}

entry_actions := {"prompt": {"list", "get"}, "resource": {"list", "read"}}

entry_visible if {
	some role in input.context.roles
	input.tool.name in data.sharedos.roles[role][entry_lists[input.tool.class]]
}

# An upstream's prompts and resources go with its namespace, by source.
entry_visible if {
	some role in input.context.roles
	some ns in data.sharedos.roles[role].namespaces
	input.tool.source == concat("", ["mcp:", ns])
}

# role_label names the principal's roles for reasons: "role engineer",
# "roles admin, engineer".
role_label := sprintf("role %s", [input.context.roles[0]]) if {
	count(input.context.roles) == 1
} else := sprintf("roles %s", [concat(", ", sort(input.context.roles))])

# resource_granted: an exact, non-file resource granted for the action, or
# an upstream tool's default resource in a namespace the role has.
resource_granted if {
	not startswith(input.resource, "file:")
	some role in input.context.roles
	input.resource in data.sharedos.roles[role].resources[input.action]
}

resource_granted if {
	input.action == "call"
	some role in input.context.roles
	some ns in data.sharedos.roles[role].namespaces
	input.resource == concat("", ["mcp:", ns, "/", substring(input.tool.name, count(ns) + 1, -1)])
	startswith(input.tool.name, concat("", [ns, "."]))
}

tool_visible if {
	some role in input.context.roles
	input.tool.name in data.sharedos.roles[role].tools
}

tool_visible if {
	some role in input.context.roles
	some ns in data.sharedos.roles[role].namespaces
	startswith(input.tool.name, concat("", [ns, "."]))
}

# A grant root covers itself and everything below it. Comparing with a
# trailing slash on both sides makes it a segment prefix test: /publicity is
# not under /public.
granted if {
	some role in input.context.roles
	some root in data.sharedos.roles[role].grants[input.action]
	startswith(clean_path_slash, concat("", [root, "/"]))
}

clean_path_slash := concat("", [clean_path, "/"])

# clean_path is the path authz-svc cleaned: backslashes are separators,
# "." and ".." resolved the way path.Clean does for a rooted path.
clean_path := input.file.path
