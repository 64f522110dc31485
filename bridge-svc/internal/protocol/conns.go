package protocol

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// ConnLimit bounds the open connections of the MCP endpoints' HTTP
// server (reliability row 46). Without it, connections opened faster than
// they end — idle keep-alive ones last IdleTimeout — took the process to
// its open-file limit, where its gRPC listener, its kernel dials and its
// database pool fail with the HTTP side. At the bound, a new connection
// makes room by closing the longest-idle keep-alive connection (a server
// may close an idle connection at any time; clients reconnect); when none
// is idle, it is served once another connection ends, and the connections
// behind it wait in the listen backlog.
type ConnLimit struct {
	max int
	log *slog.Logger
	// warn spaces the log line saying the bound was reached.
	warn *rate.Limiter

	mu   sync.Mutex
	open int
	// idle are the open connections between requests, with when each
	// became idle (ConnState).
	idle map[net.Conn]time.Time
	// freed is signalled when a connection ends or becomes idle.
	freed chan struct{}
	// waiting counts accepted connections waiting for room (tests).
	waiting atomic.Int32
}

// NewConnLimit bounds a server's open connections at max (> 0).
func NewConnLimit(max int, log *slog.Logger) *ConnLimit {
	return &ConnLimit{
		max: max, log: log, warn: rate.NewLimiter(rate.Every(time.Minute), 1),
		idle: make(map[net.Conn]time.Time), freed: make(chan struct{}, 1),
	}
}

// Listener bounds the connections accepted from ln; set ConnState as the
// server's ConnState hook.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, limit: l, done: make(chan struct{})}
}

// ConnState keeps track of which connections are idle; it is the server's
// http.Server.ConnState.
func (l *ConnLimit) ConnState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	if s != http.StateIdle {
		delete(l.idle, c)
		l.mu.Unlock()
		return
	}
	l.idle[c] = time.Now()
	l.mu.Unlock()
	// A connection waiting for room takes this one's now, not when it
	// closes (a keep-alive one lasts IdleTimeout).
	l.wake()
}

// wake tells a connection waiting for room to look again.
func (l *ConnLimit) wake() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// room waits until one more connection may be open, closing the
// longest-idle ones to make it; false when done closes first.
func (l *ConnLimit) room(done <-chan struct{}) bool {
	l.mu.Lock()
	for l.open >= l.max {
		if c := l.longestIdleLocked(); c != nil {
			delete(l.idle, c)
			l.mu.Unlock()
			_ = c.Close() // a limitConn: its release frees its room now
			l.mu.Lock()
			continue
		}
		l.mu.Unlock()
		if l.warn.Allow() {
			l.log.Warn("HTTP connections at --max-connections, none idle: new ones wait for one to end",
				slog.Int("max_connections", l.max))
		}
		l.waiting.Add(1)
		select {
		case <-l.freed:
			l.waiting.Add(-1)
		case <-done:
			l.waiting.Add(-1)
			return false
		}
		l.mu.Lock()
	}
	l.open++
	l.mu.Unlock()
	return true
}

func (l *ConnLimit) longestIdleLocked() net.Conn {
	var (
		oldest net.Conn
		since  time.Time
	)
	for c, t := range l.idle {
		if oldest == nil || t.Before(since) {
			oldest, since = c, t
		}
	}
	return oldest
}

func (l *ConnLimit) release(c net.Conn) {
	l.mu.Lock()
	l.open--
	delete(l.idle, c)
	l.mu.Unlock()
	l.wake()
}

type limitListener struct {
	net.Listener
	limit     *ConnLimit
	done      chan struct{}
	closeOnce sync.Once
}

// Accept accepts a connection and waits for room for it: a connection
// waiting here is one the server has not started to read.
func (ll *limitListener) Accept() (net.Conn, error) {
	c, err := ll.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if !ll.limit.room(ll.done) {
		_ = c.Close()
		return nil, net.ErrClosed
	}
	return &limitConn{Conn: c, limit: ll.limit}, nil
}

func (ll *limitListener) Close() error {
	ll.closeOnce.Do(func() { close(ll.done) })
	return ll.Listener.Close()
}

type limitConn struct {
	net.Conn
	limit *ConnLimit
	once  sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.limit.release(c) })
	return err
}
