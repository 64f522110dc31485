package driver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/toolshare/services/tools/column/driver"
)

// scriptedModel is a vendor endpoint answering from a script: step n of the
// conversation (n = the requests so far) is script[n], a list of tool calls
// {name, args} in the vendor's shape, or the final text once the script is
// done. It keeps every request body and checks the credential header.
type scriptedModel struct {
	t      *testing.T
	vendor driver.Vendor
	script [][][2]string
	final  string

	mu       sync.Mutex
	requests []map[string]json.RawMessage
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	wantPath, auth, want := "/v1/responses", r.Header.Get("Authorization"), "Bearer sk-test"
	if m.vendor == driver.Anthropic {
		wantPath, auth, want = "/v1/messages", r.Header.Get("x-api-key"), "sk-test"
		if r.Header.Get("anthropic-version") == "" {
			m.t.Errorf("no anthropic-version header")
		}
	}
	if r.URL.Path != wantPath || auth != want {
		m.t.Errorf("%s %s with credential %q, want %s with %q", r.Method, r.URL.Path, auth, wantPath, want)
	}
	body, _ := io.ReadAll(r.Body)
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		m.t.Errorf("request is not a JSON object: %v", err)
	}
	m.mu.Lock()
	n := len(m.requests)
	m.requests = append(m.requests, req)
	m.mu.Unlock()

	var items []string
	if n < len(m.script) {
		for i, c := range m.script[n] {
			id := fmt.Sprintf("call_%d_%d", n, i)
			if m.vendor == driver.Anthropic {
				items = append(items, `{"type":"tool_use","id":"`+id+`","name":"`+c[0]+`","input":`+c[1]+`}`)
			} else {
				q, _ := json.Marshal(c[1])
				items = append(items, `{"type":"function_call","id":"fc_`+id+`","call_id":"`+id+`","name":"`+c[0]+`","arguments":`+string(q)+`,"status":"completed"}`)
			}
		}
	} else if m.vendor == driver.Anthropic {
		items = append(items, `{"type":"text","text":"`+m.final+`"}`)
	} else {
		items = append(items, `{"type":"reasoning","id":"rs_1","summary":[]}`,
			`{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"`+m.final+`","annotations":[]}]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	if m.vendor == driver.Anthropic {
		fmt.Fprintf(w, `{"id":"msg","type":"message","role":"assistant","content":[%s],"stop_reason":"end_turn"}`, strings.Join(items, ","))
	} else {
		fmt.Fprintf(w, `{"id":"resp","object":"response","status":"completed","output":[%s]}`, strings.Join(items, ","))
	}
}

func (m *scriptedModel) bodies() []map[string]json.RawMessage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]map[string]json.RawMessage(nil), m.requests...)
}

// TestLoopWithAScriptedModel: for each vendor with an endpoint, the loop
// gives the model the turn's catalogue in the vendor's shape, executes the
// calls it makes (a public read; then a private read, a call with arguments
// that are not an object, and an unlisted name in one answer), sends every
// result back under its call id, and stops at the final answer.
func TestLoopWithAScriptedModel(t *testing.T) {
	for _, v := range []driver.Vendor{driver.Anthropic, driver.OpenAIResponses} {
		t.Run(string(v), func(t *testing.T) {
			f := newFixture(t)
			turn := open(t, f, "")
			m := &scriptedModel{t: t, vendor: v, final: "done: read one of two", script: [][][2]string{
				{{"files_read", `{"path":"/public/a.txt"}`}},
				{{"files_read", `{"path":"/private/a.txt"}`}, {"files_read", `[1]`}},
			}}
			srv := httptest.NewServer(m)
			defer srv.Close()
			base := srv.URL
			if v == driver.OpenAIResponses {
				base += "/v1/" // a base that already names /v1 is not doubled
			}
			loop := &driver.Loop{Turn: turn, Model: driver.Model{Vendor: v, BaseURL: base, Credential: "sk-test", Name: "declared-model-1"}}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tr, err := loop.Run(ctx, "read the two files")
			if err != nil {
				t.Fatal(err)
			}
			if tr.Stop != driver.StopFinal || tr.Final != "done: read one of two" || tr.Steps != 3 || tr.InvalidArguments != 1 {
				t.Errorf("transcript %+v", tr)
			}
			want := []struct{ id, status, code string }{
				{"call_0_0", "succeeded", ""}, {"call_1_0", "denied", "permission_denied"}, {"call_1_1", "", ""},
			}
			if len(tr.Observations) != len(want) {
				t.Fatalf("observations %+v", tr.Observations)
			}
			for i, w := range want {
				o := tr.Observations[i]
				if o.VendorCallID != w.id || o.Tool != "files.read" || o.Status != w.status || o.Code != w.code {
					t.Errorf("observation %d = %+v, want %+v", i, o, w)
				}
			}
			if wire, _ := f.received(); len(wire) != 2 {
				t.Errorf("the turn received %d calls, want 2 (the invalid one is not sent)", len(wire))
			}

			reqs := m.bodies()
			if len(reqs) != 3 {
				t.Fatalf("%d model requests, want 3", len(reqs))
			}
			cat, err := turn.Catalogue(v)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range reqs {
				if string(r["model"]) != `"declared-model-1"` || string(r["tools"]) != string(cat.DefinitionsJSON()) {
					t.Errorf("request %d: model %s, tools %s", i, r["model"], r["tools"])
				}
			}
			// The last request carries every call and every answer.
			history := string(reqs[2]["messages"])
			if v == driver.OpenAIResponses {
				history = string(reqs[2]["input"])
			}
			for _, s := range []string{"call_0_0", "call_1_0", "call_1_1", "denied: role engineer may not read /private/a.txt",
				"failed: the call was not sent: invalid arguments", "read the two files"} {
				if !strings.Contains(history, s) {
					t.Errorf("the conversation sent back lacks %q: %s", s, history)
				}
			}
		})
	}
}

// TestLoopStopsAfterMaxSteps: a model that keeps calling tools is stopped
// after MaxSteps requests.
func TestLoopStopsAfterMaxSteps(t *testing.T) {
	f := newFixture(t)
	turn := open(t, f, "")
	call := [][2]string{{"files_read", `{"path":"/public/a.txt"}`}}
	m := &scriptedModel{t: t, vendor: driver.Anthropic, script: [][][2]string{call, call, call, call}}
	srv := httptest.NewServer(m)
	defer srv.Close()
	loop := &driver.Loop{Turn: turn, MaxSteps: 2, Model: driver.Model{Vendor: driver.Anthropic, BaseURL: srv.URL, Credential: "sk-test", Name: "m"}}
	tr, err := loop.Run(context.Background(), "go on")
	if err != nil {
		t.Fatal(err)
	}
	if tr.Stop != driver.StopMaxSteps || tr.Steps != 2 || len(tr.Observations) != 2 || tr.Final != "" {
		t.Errorf("transcript %+v", tr)
	}
}

// TestLoopRefusesWhatItCannotRun: pi has no endpoint; an endpoint's error
// answer is reported with its status and never with the credential.
func TestLoopRefusesWhatItCannotRun(t *testing.T) {
	f := newFixture(t)
	turn := open(t, f, "")
	if _, err := (&driver.Loop{Turn: turn, Model: driver.Model{Vendor: driver.Pi, BaseURL: "http://127.0.0.1:1"}}).Run(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), `"pi"`) {
		t.Errorf("pi loop: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"type":"error","error":{"type":"authentication_error"}}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	_, err := (&driver.Loop{Turn: turn, Model: driver.Model{Vendor: driver.Anthropic, BaseURL: srv.URL, Credential: "sk-secret"}}).Run(context.Background(), "x")
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "authentication_error") || strings.Contains(err.Error(), "sk-secret") {
		t.Errorf("error answer: %v", err)
	}
}
