package telemetry

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// sampler is the sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
// name (the specification's values; default parentbased_always_on), with
// one difference: a parent from another process does not decide. A
// parent-based sampler follows a local parent span, and decides a span
// whose parent is remote as it decides a root, on its trace id. A harness
// sends the bridge a traceparent of its choosing, and its sampled flag
// would turn tracing of its calls off, or on past the operator's ratio
// (review finding). Every process decides alike (the ratio sampler is a
// function of the trace id), so a trace stays whole across the hops.
func sampler() (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	ratio := 1.0
	if arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG")); arg != "" && strings.HasSuffix(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER_ARG %q: want a ratio from 0 to 1", arg)
		}
		ratio = r
	}
	var root sdktrace.Sampler
	switch strings.TrimPrefix(name, "parentbased_") {
	case "", "always_on":
		root = sdktrace.AlwaysSample()
	case "always_off":
		root = sdktrace.NeverSample()
	case "traceidratio":
		root = sdktrace.TraceIDRatioBased(ratio)
	default:
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_SAMPLER %q: want always_on, always_off, traceidratio or parentbased_ one of them", name)
	}
	if name != "" && !strings.HasPrefix(name, "parentbased_") {
		return root, nil
	}
	return sdktrace.ParentBased(root, sdktrace.WithRemoteParentSampled(root), sdktrace.WithRemoteParentNotSampled(root)), nil
}
