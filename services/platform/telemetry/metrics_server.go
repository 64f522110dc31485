package telemetry

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServeMetrics serves h (the Prometheus handler from SetupWith) at /metrics
// on addr until the returned stop function is called. Every service exposes
// it behind its --metrics-listen flag. bound is the address listened on.
func ServeMetrics(addr string, h http.Handler, log *slog.Logger) (bound string, stop func(), err error) {
	if h == nil {
		return "", nil, errors.New("telemetry: no metrics handler (SetupWith with Prometheus: true)")
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("telemetry: metrics listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	return lis.Addr().String(), ServeHTTP(lis, mux, "metrics server", log), nil
}

// ServeHTTP serves h on lis in the background until the returned stop
// function is called (which closes lis and waits for the server to end); a
// serve error is logged under name. No write timeout: a profile or a scrape
// may take its time.
func ServeHTTP(lis net.Listener, h http.Handler, name string, log *slog.Logger) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error(name, slog.Any("error", err))
		}
	}()
	return func() { _ = srv.Close(); <-done }
}
