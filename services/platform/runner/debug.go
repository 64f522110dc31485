package runner

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/sharedos/toolshare/services/platform/config"
	"github.com/sharedos/toolshare/services/platform/mtls"
	"github.com/sharedos/toolshare/services/platform/telemetry"
)

// debugFlags are --debug-listen and --debug-listen-remote, bound for every
// serving command.
type debugFlags struct {
	listen *string
	remote *bool
}

func bindDebug(fs *flag.FlagSet) debugFlags {
	return debugFlags{
		listen: config.String(fs, "debug-listen", "", "serve net/http/pprof (/debug/pprof/) on this address, for profiling (empty: off; loopback only unless --debug-listen-remote)"),
		remote: config.Bool(fs, "debug-listen-remote", false, "allow --debug-listen on a non-loopback address (profiles expose the process's memory and code: never on an untrusted network)"),
	}
}

// check refuses a non-loopback debug address unless told otherwise.
func (d debugFlags) check() error {
	if *d.listen == "" || *d.remote {
		return nil
	}
	loopback, err := mtls.IsLoopback(*d.listen)
	if err != nil {
		return fmt.Errorf("--debug-listen: %w", err)
	}
	if !loopback {
		return fmt.Errorf("--debug-listen %q is not a loopback address (add --debug-listen-remote to serve profiles beyond this host)", *d.listen)
	}
	return nil
}

// serve starts the debug server when --debug-listen is set; stop closes
// it. Its handlers are pprof's, on a mux of its own (nothing registered on
// http.DefaultServeMux is exposed).
func (d debugFlags) serve(log *slog.Logger) (stop func(), err error) {
	if *d.listen == "" {
		return func() {}, nil
	}
	lis, err := net.Listen("tcp", *d.listen)
	if err != nil {
		return nil, fmt.Errorf("--debug-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("debug server (pprof) listening", slog.String("addr", lis.Addr().String()))
	return telemetry.ServeHTTP(lis, mux, "debug server", log), nil
}
