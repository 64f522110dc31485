package mcpserver_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/mcpserver"
)

// BenchmarkTurnMemory: the pod heap per open turn (issue 20, P7), its lease
// held by the store and not counted: "served" once its MCP server is built
// (one tools/list, as a turn in use within IdleEvict), "idle" after the sweep
// has evicted the server and only the turn's cached status is left.
func BenchmarkTurnMemory(b *testing.B) {
	const turns = 2000
	for b.Loop() {
		// The status cache as a pod runs it (--lease-cache-ttl 500ms).
		br := newTestBridge(b, mcpserver.Config{IdleEvict: time.Minute, StatusCacheTTL: 500 * time.Millisecond})
		type opened struct {
			l     *leases.Lease
			token string
		}
		all := make([]opened, turns)
		for i := range all {
			all[i].l, all[i].token = br.open(br.storeNow().Add(time.Hour))
		}
		base := heap()
		for _, o := range all {
			if st := br.list(o.l, o.token); st != 200 {
				b.Fatalf("tools/list: %d", st)
			}
		}
		served := heap()
		br.pod.t = br.pod.t.Add(2 * time.Minute)
		if err := br.h.Sweep(context.Background()); err != nil {
			b.Fatal(err)
		}
		if br.h.Served() != 0 || len(br.h.Cached()) != turns {
			b.Fatalf("after the sweep: %d served, %d cached; want 0 and %d statuses", br.h.Served(), len(br.h.Cached()), turns)
		}
		idle := heap()
		b.ReportMetric(float64(served-base)/turns, "served-heap-B/turn")
		b.ReportMetric(float64(idle-base)/turns, "idle-heap-B/turn")
		runtime.KeepAlive(all)
	}
}

func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
