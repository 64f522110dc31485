package pdp

import (
	"context"
	"strings"
	"testing"
)

func TestFileFactsOf(t *testing.T) {
	tests := []struct {
		resource string
		want     FileFacts
	}{
		{"file:/public/a.txt", FileFacts{Path: "/public/a.txt", Absolute: true}},
		{"file:/public/../private/a.txt", FileFacts{Path: "/private/a.txt", Absolute: true}},
		{"file:/public/./..//private/a.txt", FileFacts{Path: "/private/a.txt", Absolute: true}},
		{"file:/../../public/a.txt", FileFacts{Path: "/public/a.txt", Absolute: true}},
		{`file:\public\..\private\a.txt`, FileFacts{Path: "/private/a.txt", Absolute: true}},
		{"file:/public/", FileFacts{Path: "/public", Absolute: true}},
		{"file:/", FileFacts{Path: "/", Absolute: true}},
		{"file:/public/..b", FileFacts{Path: "/public/..b", Absolute: true}},
		{"file:private/a.txt", FileFacts{Path: "private/a.txt"}},
		{"file:", FileFacts{Path: ""}},
		{"file:/public/%2e%2e/private", FileFacts{Path: "/public/%2e%2e/private", Absolute: true, Suspicious: true}},
		{"file:/public/%2E%2e/private", FileFacts{Path: "/public/%2E%2e/private", Absolute: true, Suspicious: true}},
		{"file:/public%2Fprivate", FileFacts{Path: "/public%2Fprivate", Absolute: true, Suspicious: true}},
		{"file:/public%5cprivate", FileFacts{Path: "/public%5cprivate", Absolute: true, Suspicious: true}},
		{"file:/a.txt%00.png", FileFacts{Path: "/a.txt%00.png", Absolute: true, Suspicious: true}},
		{"file:/a.txt\x00.png", FileFacts{Path: "/a.txt\x00.png", Absolute: true, Suspicious: true}},
		{"file:/public/．．/private", FileFacts{Path: "/public/．．/private", Absolute: true, Suspicious: true}},
		{"file:/public/\u2024\u2024/private", FileFacts{Path: "/public/\u2024\u2024/private", Absolute: true, Suspicious: true}},
		{"file:/public\uFF0Fprivate", FileFacts{Path: "/public\uFF0Fprivate", Absolute: true, Suspicious: true}},
		{"file:/public/%20ok%2", FileFacts{Path: "/public/%20ok%2", Absolute: true}},
		// What a layer below may still decode or normalise into a
		// separator: encoded twice, overlong UTF-8, compatibility forms.
		{"file:/public/%252e%252e/private", FileFacts{Path: "/public/%252e%252e/private", Absolute: true, Suspicious: true}},
		{"file:/public/%c0%ae%c0%ae/private", FileFacts{Path: "/public/%c0%ae%c0%ae/private", Absolute: true, Suspicious: true}},
		{"file:/public/%E0%80%AE/private", FileFacts{Path: "/public/%E0%80%AE/private", Absolute: true, Suspicious: true}},
		{"file:/public/\u2025/private", FileFacts{Path: "/public/\u2025/private", Absolute: true, Suspicious: true}},
		{"file:/public/\uFE52\uFE52/private", FileFacts{Path: "/public/\uFE52\uFE52/private", Absolute: true, Suspicious: true}},
		{"file:/public\uFF3Cprivate", FileFacts{Path: "/public\uFF3Cprivate", Absolute: true, Suspicious: true}},
		{"file:/public/caf\u00e9.txt", FileFacts{Path: "/public/caf\u00e9.txt", Absolute: true}}, // not a separator
		// Encoded twice another way, %u, a 4-byte overlong form, fullwidth
		// escapes: decoding again (and again) gives a separator.
		{"file:/public/%%32%65%%32%65/private/a.txt", FileFacts{Path: "/public/%%32%65%%32%65/private/a.txt", Absolute: true, Suspicious: true}},
		{"file:/public/%%32e%%32e/private/a.txt", FileFacts{Path: "/public/%%32e%%32e/private/a.txt", Absolute: true, Suspicious: true}},
		{"file:/public/%u002e%u002e/private/a.txt", FileFacts{Path: "/public/%u002e%u002e/private/a.txt", Absolute: true, Suspicious: true}},
		{"file:/public/%U002F", FileFacts{Path: "/public/%U002F", Absolute: true, Suspicious: true}},
		{"file:/public/%f0%80%80%ae%f0%80%80%ae/private", FileFacts{Path: "/public/%f0%80%80%ae%f0%80%80%ae/private", Absolute: true, Suspicious: true}},
		{"file:/public/％２ｅ％２ｅ/private/a.txt", FileFacts{Path: "/public/％２ｅ％２ｅ/private/a.txt", Absolute: true, Suspicious: true}},
		{"file:/public/%EF%BC%8E%EF%BC%8E/private", FileFacts{Path: "/public/%EF%BC%8E%EF%BC%8E/private", Absolute: true, Suspicious: true}},
		{"file:/public/%%%32%35%32%65", FileFacts{Path: "/public/%%%32%35%32%65", Absolute: true, Suspicious: true}},
		// Escapes that decode to no separator stay plain.
		{"file:/public/caf%C3%A9%20menu.txt", FileFacts{Path: "/public/caf%C3%A9%20menu.txt", Absolute: true}},
		{"file:/public/100%.txt", FileFacts{Path: "/public/100%.txt", Absolute: true}},
		{"file:/public/%f0%9f%98%80.txt", FileFacts{Path: "/public/%f0%9f%98%80.txt", Absolute: true}},
		{"file:/public/%f8%80%80%80%ae/private", FileFacts{Path: "/public/%f8%80%80%80%ae/private", Absolute: true, Suspicious: true}},
		{"file:/public/%fc%80%80%80%80%ae/private", FileFacts{Path: "/public/%fc%80%80%80%80%ae/private", Absolute: true, Suspicious: true}},
		{"file:/public/M%FCller.txt", FileFacts{Path: "/public/M%FCller.txt", Absolute: true}}, // Latin-1, not overlong
		{"file:/public/Voil%E0.txt", FileFacts{Path: "/public/Voil%E0.txt", Absolute: true}},
		{"file:/public/%C1lvaro.txt", FileFacts{Path: "/public/%C1lvaro.txt", Absolute: true}},
		{"file:/public/%E0%B8%81.txt", FileFacts{Path: "/public/%E0%B8%81.txt", Absolute: true}}, // Thai, valid UTF-8
		{"file:/public/%ff%fe.txt", FileFacts{Path: "/public/%ff%fe.txt", Absolute: true}},
		{"file:" + strings.Repeat("/a", 64), FileFacts{Path: strings.Repeat("/a", 64), Absolute: true}},
		{"file:" + strings.Repeat("/a", 65), FileFacts{Path: strings.Repeat("/a", 65), Absolute: true, Suspicious: true}},
	}
	for _, tc := range tests {
		got, ok := FileFactsOf(tc.resource)
		if !ok || got != tc.want {
			t.Errorf("FileFactsOf(%q) = %+v, %v; want %+v", tc.resource, got, ok, tc.want)
		}
	}
	for _, r := range []string{"", "url:https://example.com", "mcp:fs/read", "File:/public/a.txt"} {
		if f, ok := FileFactsOf(r); ok {
			t.Errorf("FileFactsOf(%q) = %+v: not a file resource", r, f)
		}
	}
}

// TestExamplePolicyOnRawPaths sends raw, unclean file resources through
// authz-svc's own input building and the example policy (deploy/policies):
// the path facts are derived here, never taken from the caller.
func TestExamplePolicyOnRawPaths(t *testing.T) {
	e, err := New(context.Background(), Options{Dir: "../../../deploy/policies"})
	if err != nil {
		t.Fatal(err)
	}
	engineer := Context{Principal: "alice", Tenant: "acme", Roles: []string{"engineer"}}
	admin := Context{Principal: "root", Tenant: "acme", Roles: []string{"admin"}}
	read := Tool{Name: "files.read", Namespace: "files", Class: "managed", Source: "provider:files"}
	tests := []struct {
		ctx      Context
		path     string
		allow    bool
		inReason string
	}{
		{engineer, "/public/a.txt", true, "may read /public/a.txt"},
		{engineer, "/public/../private/a.txt", false, "may not read /private/a.txt"},
		{engineer, "/public/./..//private/a.txt", false, "may not read /private/a.txt"},
		{admin, "/public/../private/a.txt", true, "may read /private/a.txt"},
		{engineer, "/../../public/a.txt", true, "may read /public/a.txt"},
		{engineer, "/public/x/../../../private/a.txt", false, "may not read /private/a.txt"},
		{engineer, `\public\..\private\a.txt`, false, "may not read /private/a.txt"},
		{engineer, `\public\a.txt`, true, "may read /public/a.txt"},
		{engineer, "/publicity/a.txt", false, "may not read /publicity/a.txt"},
		{engineer, "/public/%2e%2e/private/a.txt", false, "path refused: it contains"},
		{engineer, "/public/%2E%2E/private/a.txt", false, "path refused: it contains"},
		{engineer, "/public/．．/private/a.txt", false, "path refused: it contains"},
		{engineer, "/public/a.txt\x00.png", false, "path refused: it contains"},
		{engineer, "/public/%%32%65%%32%65/private/a.txt", false, "path refused: it contains"},
		{engineer, "/public/%u002e%u002e/private/a.txt", false, "path refused: it contains"},
		{admin, "/public/%2e%2e/private/a.txt", false, "path refused: it contains"},
		{engineer, "/public" + strings.Repeat("/a", 70), false, "path refused: it contains"},
		{admin, "private/a.txt", false, "path refused: it must be absolute"},
	}
	for _, tc := range tests {
		d, _, err := e.Decide(context.Background(), Request{Context: tc.ctx, Tool: read, Action: "read", Resource: "file:" + tc.path})
		if err != nil {
			t.Fatalf("%q: %v", tc.path, err)
		}
		if d.Allow != tc.allow || !strings.Contains(d.Reason, tc.inReason) {
			t.Errorf("%v read %q = allow %v (%q); want %v with %q", tc.ctx.Roles, tc.path, d.Allow, d.Reason, tc.allow, tc.inReason)
		}
	}
}
