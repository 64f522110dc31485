package requirement_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/contract/requirement"
)

func fileReq(cleaning sharedosv1.PathCleaning) *sharedosv1.Requirement {
	return &sharedosv1.Requirement{Action: "read", Resource: "file:{path}", PathCleaning: cleaning}
}

func TestResolveCleansTraversalToWhatTheHandlerTouches(t *testing.T) {
	cases := map[string]string{
		`/public/a.txt`:                "file:/public/a.txt",
		`/public/../private/a.txt`:     "file:/private/a.txt",
		`/public/./..//private/a.txt`:  "file:/private/a.txt",
		`/publicity/a.txt`:             "file:/publicity/a.txt",
		`\\public\\..\\private`:        "file:/private",
		`public/a.txt`:                 "file:/public/a.txt",
		`../../../etc/passwd`:          "file:/etc/passwd",
		`/public/%2e%2e/private/a.txt`: "file:/public/%2e%2e/private/a.txt",
		"/public/\uff0e\uff0e/private": "file:/public/\uff0e\uff0e/private",
		``:                             "file:/",
	}
	for in, want := range cases {
		for _, c := range []sharedosv1.PathCleaning{sharedosv1.PathCleaning_PATH_CLEANING_UNSPECIFIED, sharedosv1.PathCleaning_PATH_CLEANING_POSIX} {
			action, got, err := requirement.Resolve(fileReq(c), []byte(`{"path":"`+in+`"}`))
			if err != nil {
				t.Fatalf("%s (%v): %v", in, c, err)
			}
			if action != "read" || got != want {
				t.Errorf("%s (%v) = %q %q, want read %q", in, c, action, got, want)
			}
		}
	}
}

func TestResolveNoneKeepsValue(t *testing.T) {
	_, got, err := requirement.Resolve(fileReq(sharedosv1.PathCleaning_PATH_CLEANING_NONE), []byte(`{"path":"a/../b"}`))
	if err != nil || got != "file:a/../b" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestResolveScalarsAndLiterals(t *testing.T) {
	req := &sharedosv1.Requirement{Action: "get", Resource: "repo:{{x}}{owner}#{n}@{ok}", PathCleaning: sharedosv1.PathCleaning_PATH_CLEANING_NONE}
	_, got, err := requirement.Resolve(req, []byte(`{"owner":"acme","n":12.50,"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "repo:{x}acme#12.50@true"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	// A template without placeholders does not look at the arguments.
	_, got, err = requirement.Resolve(&sharedosv1.Requirement{Action: "list", Resource: "files:*"}, nil)
	if err != nil || got != "files:*" {
		t.Fatalf("got %q %v", got, err)
	}
}

func TestResolveArgumentErrors(t *testing.T) {
	cases := []struct {
		args, field, rule string
	}{
		{`{}`, "arguments.path", "required"},
		{`{"path":null}`, "arguments.path", "type"},
		{`{"path":{"a":1}}`, "arguments.path", "type"},
		{`{"path":["/public"]}`, "arguments.path", "type"},
		{`{"path":"/public/a\u0000.txt"}`, "arguments.path", "no_nul"},
		{`{"path":"` + strings.Repeat("a", requirement.MaxValueBytes+1) + `"}`, "arguments.path", "max_length"},
		// Within the value cap, but the resource ("file:" + the path) is over
		// authz-svc's cap: the arguments' fault, not the policy's.
		{`{"path":"/public/` + strings.Repeat("a", requirement.MaxValueBytes-len("/public/")) + `"}`, "arguments.", "max_length"},
		{`[1]`, "arguments.", "object"},
		{`null`, "arguments.", "object"},
		{`not json`, "arguments.", "object"},
	}
	for _, c := range cases {
		_, _, err := requirement.Resolve(fileReq(0), []byte(c.args))
		var e *requirement.Error
		if !errors.As(err, &e) || !errors.Is(err, requirement.ErrArguments) {
			t.Fatalf("%s: err = %v, want an arguments *Error", c.args, err)
		}
		if e.Field != c.field || e.Rule != c.rule {
			t.Errorf("%s: field/rule = %s/%s, want %s/%s", c.args, e.Field, e.Rule, c.field, c.rule)
		}
	}
}

func TestRequirementErrors(t *testing.T) {
	cases := []struct {
		req   *sharedosv1.Requirement
		field string
	}{
		{nil, "requirement."},
		{&sharedosv1.Requirement{Resource: "file:{path}"}, "requirement.action"},
		{&sharedosv1.Requirement{Action: "read", Resource: "file:{path"}, "requirement.resource"},
		{&sharedosv1.Requirement{Action: "read", Resource: "file:path}"}, "requirement.resource"},
		{&sharedosv1.Requirement{Action: "read", Resource: "file:{a.b}"}, "requirement.resource"},
		{&sharedosv1.Requirement{Action: "read", Resource: "file:{}"}, "requirement.resource"},
		{&sharedosv1.Requirement{Action: "read", Resource: "file:{path}", PathCleaning: 9}, "requirement.path_cleaning"},
	}
	for _, c := range cases {
		for name, err := range map[string]error{
			"Validate": requirement.Validate(c.req),
			"Resolve":  func() error { _, _, err := requirement.Resolve(c.req, []byte(`{"path":"/x"}`)); return err }(),
		} {
			var e *requirement.Error
			if !errors.As(err, &e) || !errors.Is(err, requirement.ErrRequirement) || e.Field != c.field {
				t.Errorf("%s(%v) = %v, want requirement error on %s", name, c.req, err, c.field)
			}
		}
	}
	if _, res, err := requirement.Resolve(&sharedosv1.Requirement{Action: "list"}, nil); err != nil || res != "" {
		t.Errorf("action-only requirement: %q, %v", res, err)
	}
	if err := requirement.Validate(fileReq(0)); err != nil {
		t.Errorf("valid requirement rejected: %v", err)
	}
}

func TestPlaceholders(t *testing.T) {
	got, err := requirement.Placeholders("x:{a}/{b}/{{c}}/{a}")
	if err != nil || strings.Join(got, ",") != "a,b,a" {
		t.Fatalf("got %v %v", got, err)
	}
}

func FuzzCleanPOSIX(f *testing.F) {
	for _, s := range []string{"/public/../private", `\a\..\b`, "", "..", "/./", "a//b/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c := requirement.CleanPOSIX(p)
		if !strings.HasPrefix(c, "/") {
			t.Fatalf("%q → %q is not absolute", p, c)
		}
		if requirement.CleanPOSIX(c) != c {
			t.Fatalf("%q → %q is not idempotent", p, c)
		}
		for _, el := range strings.Split(c, "/") {
			if el == ".." || el == "." {
				t.Fatalf("%q → %q keeps a dot element", p, c)
			}
		}
		if strings.Contains(c, `\`) {
			t.Fatalf("%q → %q keeps a backslash", p, c)
		}
	})
}

func ExampleResolve() {
	req := &sharedosv1.Requirement{Action: "read", Resource: "file:{path}"}
	for _, p := range []string{"/public/a.txt", "/public/../private/a.txt"} {
		action, resource, _ := requirement.Resolve(req, []byte(fmt.Sprintf(`{"path":%q}`, p)))
		fmt.Println(action, resource)
	}
	// Output:
	// read file:/public/a.txt
	// read file:/private/a.txt
}
