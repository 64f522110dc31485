// Package runner is the one composition root every SharedOS binary's main
// goes through: Config → Complete(ctx) → Run(ctx), the way SpiceDB's serve
// command is built. A binary describes itself as a Command — how its flags
// bind into its Config, how a Config completes into something that runs,
// and any extra subcommands (migrate, registrations) — and its main is one
// line:
//
//	func main() { os.Exit(runner.Main(app.Command, os.Args[1:], os.Stdout, os.Stderr)) }
//
// Main owns what every binary does alike: the subcommand switch and usage,
// `config-reference` (the flag/env table docs/configuration.md is made
// from), flag parsing with every bad value and bad environment variable
// reported together, SIGINT/SIGTERM, the binary's GOGC default
// (Command.GCPercent, and Command.GCHeadroom for a heap that is small until
// its state grows), OpenTelemetry and the Prometheus handler (metrics
// are recorded only when --metrics-listen or OTLP export can carry them),
// `--debug-listen` (net/http/pprof on its own listener, loopback only unless
// --debug-listen-remote), printing the effective configuration (secrets
// redacted), and the exit codes: 0 done, 1 failed, 2 usage. Nothing listens until Complete has
// succeeded; health (readiness "" and grpcx.LivenessService) is set by the
// grpcx server each binary builds in Complete.
package runner
