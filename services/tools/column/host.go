package column

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sharedos/toolshare/services/tools/regfile"
)

// Kinds of column.
const (
	KindMCP      = "mcp"
	KindScripted = "scripted"
	KindLive     = "live"
)

// Harnesses each kind of column runs (--harness NAME).
var Harnesses = map[string][]string{
	KindMCP:      {"claude-code", "codex", "gemini-cli", "pi"},
	KindScripted: {"anthropic", "openai-responses", "pi"},
	KindLive:     {"anthropic", "openai-responses", "pi"},
}

// HostConfig is the operator's host configuration: per harness, how it is
// started and what model it was declared to run. SharedOS passes env and
// args through unchanged and selects nothing about the model.
// A section per kind: the same harness name (pi, anthropic) is a CLI in
// one kind and a vendor shape in another, with its own declared model.
type HostConfig struct {
	MCP      map[string]Harness `json:"mcp,omitempty"`
	Scripted map[string]Harness `json:"scripted,omitempty"`
	Live     map[string]Harness `json:"live,omitempty"`
	// dir is the file's directory: a relative executable or extension path
	// (one with a slash) is relative to it.
	dir string
}

// Harness is one harness's host configuration.
type Harness struct {
	// Executable, Args and Env start an installed CLI (mcp); passed through
	// unchanged.
	Executable string            `json:"executable,omitempty"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	// Files are written into the harness's private home before it starts
	// (path relative to the home → content): the model provider's side of
	// the harness's configuration (pi's agent/models.json, a Codex or Gemini
	// base configuration). SharedOS adds its MCP server to the file it owns
	// (merged into JSON, appended to Codex's TOML).
	Files map[string]string `json:"files,omitempty"`
	// Version is the harness's version as the host knows it (recorded).
	Version string `json:"version,omitempty"`
	// DeclaredModel is recorded on every operation of the run, never used.
	DeclaredModel string `json:"declaredModel,omitempty"`
	// Extension is the name of the MCP client extension a harness without
	// its own (Pi) runs with, as records carry it; ExtensionPath is where it
	// is loaded from (default: Extension). Its support is then "extension".
	Extension     string `json:"extension,omitempty"`
	ExtensionPath string `json:"extensionPath,omitempty"`
	// Vendor, BaseURL and CredentialRef are a live column's model endpoint
	// (anthropic or openai-responses) and the reference (env:NAME or
	// file:PATH) its credential is read from.
	Vendor        string `json:"vendor,omitempty"`
	BaseURL       string `json:"baseURL,omitempty"`
	CredentialRef string `json:"credentialRef,omitempty"`
}

// ReadHostConfig reads a host configuration file (YAML or JSON).
func ReadHostConfig(path string) (*HostConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var h HostConfig
	if err := regfile.DecodeStrict(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	h.dir = filepath.Dir(path)
	return &h, nil
}

// For returns the configuration of harness for a column of kind, checking
// the harness is one the kind runs and its configuration has what the
// kind needs.
func (h *HostConfig) For(kind, harness string) (Harness, error) {
	names, ok := Harnesses[kind]
	if !ok {
		return Harness{}, fmt.Errorf("--kind must be %s, %s or %s, not %q", KindMCP, KindScripted, KindLive, kind)
	}
	if !slices.Contains(names, harness) {
		return Harness{}, fmt.Errorf("--harness for a %s column must be one of %s, not %q", kind, strings.Join(names, ", "), harness)
	}
	section := map[string]map[string]Harness{KindMCP: h.MCP, KindScripted: h.Scripted, KindLive: h.Live}[kind]
	c, ok := section[harness]
	if !ok {
		return Harness{}, fmt.Errorf("%s.%s: not in the host configuration", kind, harness)
	}
	switch kind {
	case KindMCP:
		if c.Executable == "" {
			return Harness{}, fmt.Errorf("mcp.%s.executable: required", harness)
		}
		if harness == "pi" && c.Extension == "" {
			return Harness{}, fmt.Errorf("mcp.pi.extension: required (pi reaches MCP only through an extension: its name)")
		}
		for _, k := range []string{"HOME", "CODEX_HOME", "PI_CODING_AGENT_DIR"} {
			if _, ok := c.Env[k]; ok {
				return Harness{}, fmt.Errorf("mcp.%s.env.%s: set by SharedOS (the harness's private home holds its configuration)", harness, k)
			}
		}
		if c.Extension != "" && c.ExtensionPath == "" {
			c.ExtensionPath = c.Extension
		}
		c.Executable, c.ExtensionPath = h.local(c.Executable), h.local(c.ExtensionPath)
	case KindLive:
		if c.BaseURL == "" {
			return Harness{}, fmt.Errorf("live.%s.baseURL: required", harness)
		}
	}
	return c, nil
}

// local resolves a relative path with a slash against the file's
// directory; a bare name (found on PATH) or an absolute path stays.
func (h *HostConfig) local(p string) string {
	if h.dir == "" || !strings.Contains(p, "/") || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(h.dir, p)
}
