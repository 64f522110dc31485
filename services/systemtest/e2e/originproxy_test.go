package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// lateBodyReader stands in for http.Transport when its writeLoop is slow: the
// upstream has the request and answers, and only once the client already has
// the first bytes of that answer does the Transport read the outbound body
// once more (transferWriter.writeBody's check for data past ContentLength).
type lateBodyReader struct {
	clientHasHead chan struct{}
	lateRead      chan error
}

func (l *lateBodyReader) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, err := io.ReadFull(req.Body, make([]byte, req.ContentLength)); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write(bytes.Repeat([]byte("a"), 4096))
		<-l.clientHasHead
		_, err := req.Body.Read(make([]byte, 1))
		l.lateRead <- err
		if !errors.Is(err, io.EOF) {
			// persistConn.writeLoop: a request body read error closes the
			// upstream connection, the answer still on its way with it.
			_ = pw.CloseWithError(err)
			return
		}
		_, _ = pw.Write(bytes.Repeat([]byte("b"), 8192))
		_ = pw.Close()
	}()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: pr, ContentLength: -1, Request: req}, nil
}

// TestOriginProxyBodyReadAfterAnswerBegan: the conformance suite's origin
// proxy must not depend on the client's request body once its own answer has
// begun, or a Transport that reads the body late tears the upstream
// connection down mid-answer (the "terminated" tools/list).
func TestOriginProxyBodyReadAfterAnswerBegan(t *testing.T) {
	rt := &lateBodyReader{clientHasHead: make(chan struct{}), lateRead: make(chan error, 1)}
	rp := originProxy(&url.URL{Scheme: "http", Host: "upstream.invalid", Path: "/turns/t/mcp"}, "tok")
	rp.Transport = rt
	srv := httptest.NewServer(rp)
	defer srv.Close()

	res, err := http.Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if _, err := io.ReadFull(res.Body, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	close(rt.clientHasHead)
	if err := <-rt.lateRead; !errors.Is(err, io.EOF) {
		t.Errorf("the Transport's late read of the request body: %v, want io.EOF", err)
	}
	rest, err := io.ReadAll(res.Body)
	if err != nil || len(rest) != 4096+8192-1 {
		t.Errorf("answer after the first byte: %d bytes, %v", len(rest), err)
	}
}
