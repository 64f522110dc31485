package app

import (
	"fmt"
	"runtime/debug"

	opaversion "github.com/open-policy-agent/opa/v1/version"
)

// Version describes the build: module version, VCS revision when stamped,
// Go version and the embedded OPA version.
func Version() string {
	mod, rev, gover := "(devel)", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		gover = bi.GoVersion
		if bi.Main.Version != "" {
			mod = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	out := fmt.Sprintf("authz-svc %s", mod)
	if rev != "" {
		out += " (" + rev + ")"
	}
	return fmt.Sprintf("%s %s opa %s", out, gover, opaversion.Version)
}
