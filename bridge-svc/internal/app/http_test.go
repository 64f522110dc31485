package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/services/systemtest/launch"
)

// rawReq is one hand-made HTTP request to a turn endpoint.
type rawReq struct {
	method  string
	url     string
	token   string // "" = no Authorization
	body    string
	headers map[string]string
	// modern adds the 2026-07-28 headers for the body's method/name.
	modern bool
}

type rawResp struct {
	status int
	header http.Header
	body   []byte
}

func (r rawResp) rpcError() (int, string) {
	var m struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body := r.body
	if i := bytes.Index(body, []byte("data: ")); i >= 0 {
		body = body[i+len("data: "):]
	}
	if json.Unmarshal(body, &m) != nil || m.Error == nil {
		return 0, ""
	}
	return m.Error.Code, m.Error.Message
}

func do(t *testing.T, q rawReq) rawResp {
	t.Helper()
	resp, err := send(q)
	if err != nil {
		t.Fatalf("%s %s: %v", q.method, q.url, err)
	}
	return resp
}

// send is do without a *testing.T, for use off the test goroutine.
func send(q rawReq) (rawResp, error) {
	req, err := q.request()
	if err != nil {
		return rawResp{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rawResp{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return rawResp{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// request is q as an HTTP request.
func (q rawReq) request() (*http.Request, error) {
	if q.method == "" {
		q.method = http.MethodPost
	}
	req, err := http.NewRequest(q.method, q.url, strings.NewReader(q.body))
	if err != nil {
		return nil, err
	}
	if q.method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if q.token != "" {
		req.Header.Set("Authorization", "Bearer "+q.token)
	}
	if q.modern {
		var m struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(q.body), &m)
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", m.Method)
		if m.Params.Name != "" {
			req.Header.Set("Mcp-Name", m.Params.Name)
		}
	}
	for k, v := range q.headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	return req, nil
}

// modernMeta is the _meta every 2026-07-28 request carries.
const modernMeta = launch.ModernMeta

func modernList(id int) string {
	return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/list","params":{` + modernMeta + `}}`
}

func modernCall(id int, name, args string) string { return launch.ModernCall(id, name, args) }

const legacyInit = launch.LegacyInit

func legacyList(id int) string {
	return `{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"tools/list","params":{}}`
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func quoteJSON(s string) string { b, _ := json.Marshal(s); return string(b) }
