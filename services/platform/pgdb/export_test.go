package pgdb

// HoldForTest takes g's one batch slot, so every statement queues until
// release sends the queue as one batch; queued counts what waits.
func (g *Group) HoldForTest() (queued func() int, release func()) {
	g.mu.Lock()
	g.inflight++
	g.mu.Unlock()
	queued = func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue)
	}
	release = func() {
		g.mu.Lock()
		batch := g.take()
		g.mu.Unlock()
		go g.run(batch)
	}
	return queued, release
}

// OnWaitForTest has Lock call f each time it finds its lock taken (here
// or elsewhere).
func (l *Locks) OnWaitForTest(f func()) { l.waited = f }
