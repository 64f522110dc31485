package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2/clientcredentials"
)

// One token fetch serves every request waiting for it: a waiter that
// leaves ends only its own wait, the fetch goes on for the others, and its
// token is kept for the requests after them.
func TestTokenFetchOutlivesALeavingWaiter(t *testing.T) {
	var fetches atomic.Int32
	asked, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		fetches.Add(1)
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"tok","token_type":"Bearer","expires_in":3600}`))
	}))
	t.Cleanup(srv.Close)
	tt := &tokenTransport{cc: clientcredentials.Config{ClientID: "a", ClientSecret: "b", TokenURL: srv.URL},
		fetch: srv.Client(), timeout: time.Hour, next: http.DefaultTransport, life: t.Context()}
	waiters := func() int {
		tt.mu.Lock()
		defer tt.mu.Unlock()
		if tt.running == nil {
			return 0
		}
		return tt.running.waiters
	}
	ctxA, leaveA := context.WithCancel(t.Context())
	errA := make(chan error, 1)
	go func() { _, err := tt.token(ctxA); errA <- err }()
	<-asked
	type result struct {
		tok string
		err error
	}
	resB := make(chan result, 1)
	go func() {
		tok, err := tt.token(t.Context())
		if err != nil {
			resB <- result{err: err}
			return
		}
		resB <- result{tok: tok.AccessToken}
	}()
	for waiters() < 2 {
		runtime.Gosched()
	}
	leaveA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter that left: %v", err)
	}
	close(release)
	if r := <-resB; r.err != nil || r.tok != "tok" {
		t.Fatalf("the waiter that stayed: %+v", r)
	}
	if tok, err := tt.token(t.Context()); err != nil || tok.AccessToken != "tok" {
		t.Fatalf("a later request: %v, %v", tok, err)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

// A token the upstream refuses (401) is not sent again: the next request
// fetches another, expiry or none.
func TestARefusedTokenIsFetchedAnew(t *testing.T) {
	var fetches atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer"}`, fetches.Add(1))
	}))
	t.Cleanup(tokens.Close)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-2" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(upstream.Close)
	tt := &tokenTransport{cc: clientcredentials.Config{ClientID: "a", ClientSecret: "b", TokenURL: tokens.URL},
		fetch: tokens.Client(), timeout: time.Hour, next: http.DefaultTransport, life: t.Context()}
	for i, want := range []int{http.StatusUnauthorized, http.StatusOK} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, upstream.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("request %d: %d, want %d (%d token fetches)", i+1, resp.StatusCode, want, fetches.Load())
		}
	}
}
