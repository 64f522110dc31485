package charttest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction after line continuations are
// joined and comments dropped.
type instruction struct {
	Line int
	Cmd  string // upper case: FROM, RUN, COPY, ...
	Args string
}

// stage is one FROM ... block.
type stage struct {
	Image, Name string
	Body        []instruction
}

// parseDockerfile is a deliberately small parser: enough of the Dockerfile
// grammar (comments, `\` continuations, instructions) for the rules below.
func parseDockerfile(src string) ([]stage, error) {
	var (
		stages  []stage
		pending strings.Builder
		start   int
	)
	lines := strings.Split(src, "\n")
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if pending.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if pending.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // comment lines inside a continuation are ignored by Docker too
		}
		if pending.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(line, "\\") {
			pending.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		pending.WriteString(line)
		text := pending.String()
		pending.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{Line: start, Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args)}
		if in.Cmd == "FROM" {
			f := strings.Fields(in.Args)
			st := stage{}
			for _, w := range f {
				if strings.HasPrefix(w, "--") {
					continue
				}
				if st.Image == "" {
					st.Image = w
				}
			}
			if len(f) >= 3 && strings.EqualFold(f[len(f)-2], "AS") {
				st.Name = f[len(f)-1]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.Cmd == "ARG" {
				continue // ARG before the first FROM is allowed
			}
			return nil, fmt.Errorf("line %d: %s before the first FROM", in.Line, in.Cmd)
		}
		stages[len(stages)-1].Body = append(stages[len(stages)-1].Body, in)
	}
	if pending.Len() > 0 {
		return nil, fmt.Errorf("line %d: unterminated continuation", start)
	}
	return stages, nil
}

var (
	sha256Digest   = regexp.MustCompile(`^sha256:[a-f0-9]{64}$`)
	nonRootUser    = regexp.MustCompile(`^(nonroot|65532)(:(nonroot|65532))?$`)
	finalBaseImage = regexp.MustCompile(`^(gcr\.io/distroless/static(-debian[0-9]+)?:nonroot(@sha256:[a-f0-9]{64})?|gcr\.io/distroless/static(-debian[0-9]+)?@sha256:[a-f0-9]{64}|scratch)$`)
)

// pinnedImageRef: name@sha256:<digest>, or name:tag with a tag other than
// latest. A build ARG in the reference could be anything, so it does not count.
func pinnedImageRef(ref string) bool {
	if strings.Contains(ref, "$") {
		return false
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	if hasDigest {
		return sha256Digest.MatchString(digest)
	}
	_, tag, hasTag := strings.Cut(name[strings.LastIndex(name, "/")+1:], ":")
	return hasTag && tag != "" && tag != "latest"
}

func checkDockerfile(src, binary string) []string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	stages, err := parseDockerfile(src)
	if err != nil {
		return []string{err.Error()}
	}
	if len(stages) < 2 {
		return []string{"must be multi-stage: a builder and a minimal final stage"}
	}
	for _, st := range stages {
		if st.Image != "scratch" && !pinnedImageRef(st.Image) {
			bad("base image %q must be pinned by a tag (not latest) or a digest", st.Image)
		}
	}

	build := stages[0]
	cgoOff := false
	builds := false
	for _, in := range build.Body {
		if (in.Cmd == "ENV" || in.Cmd == "ARG") && strings.Contains(in.Args, "CGO_ENABLED=0") {
			cgoOff = true
		}
		if in.Cmd == "RUN" && strings.Contains(in.Args, "CGO_ENABLED=0") {
			cgoOff = true
		}
		if in.Cmd == "RUN" && strings.Contains(in.Args, "go build") && strings.Contains(in.Args, "/"+binary) {
			builds = true
		}
	}
	if !strings.HasPrefix(build.Image, "golang:1.26") {
		bad("builder must be golang:1.26.x, got %q", build.Image)
	}
	if !cgoOff {
		bad("builder must set CGO_ENABLED=0 (a static binary for a libc-less image)")
	}
	if !builds {
		bad("builder must `go build` %s", binary)
	}

	final := stages[len(stages)-1]
	if !finalBaseImage.MatchString(final.Image) {
		bad("final stage must be distroless static (nonroot) or scratch, got %q", final.Image)
	}
	var user string
	hasEntrypoint := false
	for _, in := range final.Body {
		switch in.Cmd {
		case "RUN":
			bad("line %d: RUN in the final stage needs a shell; the final image has none", in.Line)
		case "SHELL", "ADD", "ONBUILD":
			bad("line %d: %s is not allowed in the final stage", in.Line, in.Cmd)
		case "USER":
			user = in.Args
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(in.Args), &argv); err != nil || len(argv) == 0 {
				bad("line %d: %s must use the exec (JSON) form; the shell form needs /bin/sh", in.Line, in.Cmd)
			} else if argv[0] == "/bin/sh" || argv[0] == "sh" || argv[0] == "/bin/bash" {
				bad("line %d: %s runs a shell", in.Line, in.Cmd)
			}
			if in.Cmd == "ENTRYPOINT" && err == nil && len(argv) > 0 && filepath.Base(argv[0]) != binary {
				bad("line %d: ENTRYPOINT runs %q, want %s", in.Line, argv[0], binary)
			}
			hasEntrypoint = hasEntrypoint || in.Cmd == "ENTRYPOINT"
		case "COPY":
			if !strings.Contains(in.Args, "--from=") {
				bad("line %d: the final stage copies only build outputs (COPY --from=...)", in.Line)
			}
		}
	}
	if !nonRootUser.MatchString(user) {
		bad("final stage must end as USER 65532:65532 (nonroot), got %q", user)
	}
	if !hasEntrypoint {
		bad("final stage needs an ENTRYPOINT")
	}
	return problems
}

func TestDockerfiles(t *testing.T) {
	root := repoRoot(t)
	for path, binary := range map[string]string{
		"catalog-svc/Dockerfile":                 "catalog-svc",
		"authz-svc/Dockerfile":                   "authz-svc",
		"bridge-svc/Dockerfile":                  "bridge-svc",
		"services/cmd/files-provider/Dockerfile": "files-provider",
	} {
		t.Run(binary, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join(root, path))
			if err != nil {
				t.Fatalf("read %s: %v", path, err)
			}
			for _, p := range checkDockerfile(string(src), binary) {
				t.Errorf("%s: %s", path, p)
			}
		})
	}
}

// TestDockerfileRules proves each rule can fail.
func TestDockerfileRules(t *testing.T) {
	good := `FROM golang:1.26.8 AS build
ENV CGO_ENABLED=0
RUN cd x && go build -o /out/x \
    ./cmd/x
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/x /usr/local/bin/x
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/x"]
`
	if p := checkDockerfile(good, "x"); len(p) != 0 {
		t.Fatalf("a compliant Dockerfile was rejected: %v", p)
	}
	cases := map[string]struct{ from, to, want string }{
		"single stage":      {"FROM golang:1.26.8 AS build\nENV CGO_ENABLED=0\nRUN cd x && go build -o /out/x \\\n    ./cmd/x\n", "", "multi-stage"},
		"untagged base":     {"FROM gcr.io/distroless/static-debian12:nonroot", "FROM gcr.io/distroless/static-debian12", "pinned"},
		"latest builder":    {"FROM golang:1.26.8 AS build", "FROM golang:latest AS build", "pinned"},
		"root user":         {"USER 65532:65532", "USER root", "USER 65532"},
		"no user":           {"USER 65532:65532\n", "", "USER 65532"},
		"shell in final":    {"USER 65532", "RUN chmod +x /usr/local/bin/x\nUSER 65532", "RUN in the final stage"},
		"shell entrypoint":  {`ENTRYPOINT ["/usr/local/bin/x"]`, "ENTRYPOINT /usr/local/bin/x", "exec (JSON) form"},
		"cgo":               {"ENV CGO_ENABLED=0\n", "", "CGO_ENABLED=0"},
		"debian final":      {"FROM gcr.io/distroless/static-debian12:nonroot", "FROM debian:12.8", "distroless static"},
		"copy from context": {"COPY --from=build /out/x /usr/local/bin/x", "COPY x /usr/local/bin/x", "COPY --from"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(good, tc.from, tc.to, 1)
			if tc.from != "" && !strings.Contains(good, tc.from) {
				t.Fatalf("test case does not apply: %q not in the sample", tc.from)
			}
			if name == "single stage" {
				src = tc.from
			}
			problems := strings.Join(checkDockerfile(src, "x"), "\n")
			if !strings.Contains(problems, tc.want) {
				t.Errorf("want a problem mentioning %q, got:\n%s", tc.want, problems)
			}
		})
	}
}
