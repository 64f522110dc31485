package telemetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
)

func TestServeMetrics(t *testing.T) {
	shutdown, h, err := SetupWith(context.Background(), "sharedos-test", SetupOptions{Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	if _, _, err := ServeMetrics("127.0.0.1:0", nil, slog.Default()); err == nil {
		t.Fatal("nil handler accepted")
	}
	addr, stop, err := ServeMetrics("127.0.0.1:0", h, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	c, _ := otel.Meter("test").Int64Counter("sharedos.test.scrapes")
	c.Add(context.Background(), 3)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "sharedos_test_scrapes") {
		t.Fatalf("scrape: %d\n%s", resp.StatusCode, body)
	}
	stop()
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Fatal("metrics still served after stop")
	}
}
