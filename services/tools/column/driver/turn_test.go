package driver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/sharedos/toolshare/services/contract/outcome"
	"github.com/sharedos/toolshare/services/tools/column/driver"
)

const fixtureToken = "turn-token-1"

// fixtureSchema has what mcp-go's typed decoding of a tool would drop or
// reorder (a top-level description and anyOf, $schema, nested keys out of
// order), so Turn.Tools shows whether the answer's own bytes were kept.
const fixtureSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","description":"one path",` +
	`"properties":{"path":{"type":"string","minLength":1,"description":"absolute"}},"anyOf":[{"required":["path"]}]}`

// fixture is a plain mcp-go Streamable HTTP server standing in for a turn:
// files.read answers like the bridge (a refusal is an isError result with
// _meta["io.sharedos/outcome"]), a bearer token is required, and every
// tools/call's params.arguments are kept as they came off the wire.
type fixture struct {
	url string

	mu    sync.Mutex
	wire  []json.RawMessage // params.arguments of each tools/call, as received
	names []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{}
	s := server.NewMCPServer("turn-fixture", "1", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewToolWithRawSchema("files.read", "Read a file.", json.RawMessage(fixtureSchema)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Path string `json:"path"`
			}
			_ = json.Unmarshal(req.Params.RawArguments, &args)
			f.mu.Lock()
			callID := "c" + strconv.Itoa(len(f.wire))
			f.mu.Unlock()
			var res *mcp.CallToolResult
			meta := map[string]any{"callId": callID, "decisionId": "d-" + callID}
			if strings.HasPrefix(args.Path, "/private/") {
				res = mcp.NewToolResultError("denied: role engineer may not read " + args.Path)
				meta["status"], meta["code"] = "denied", outcome.PermissionDenied
			} else {
				res = mcp.NewToolResultText("contents of " + args.Path)
				meta["status"], meta["code"] = "succeeded", ""
			}
			res.Meta = &mcp.Meta{AdditionalFields: map[string]any{outcome.MetaKey: meta}}
			return res, nil
		})
	mcpHandler := server.NewStreamableHTTPServer(s)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+fixtureToken {
			http.Error(w, "bad bearer", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
				f.mu.Lock()
				f.wire, f.names = append(f.wire, msg.Params.Arguments), append(f.names, msg.Params.Name)
				f.mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		mcpHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	f.url = ts.URL + "/mcp"
	return f
}

func (f *fixture) received() ([]json.RawMessage, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]json.RawMessage(nil), f.wire...), append([]string(nil), f.names...)
}

func open(t *testing.T, f *fixture, version string) *driver.Turn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	turn, err := driver.Open(ctx, f.url, fixtureToken, driver.Options{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("Open (%q): %v", version, err)
	}
	t.Cleanup(func() { turn.Close() })
	return turn
}

// tricky arguments as a model writes them: compact, unicode escapes, a
// surrogate pair, a raw non-ASCII character, an integer beyond 2^64, -0.0,
// nested objects with keys out of order, quotes, backslashes and control
// escapes. (1e400 is in the golden tests only: mcp-go's server decodes
// arguments into float64 and refuses it.)
const trickyArgs = `{"path":"/public/a.txt","s":"caf\u00e9 \ud83d\ude00 é","big":12345678901234567890,"neg":-0.0,` +
	`"nested":{"z":[1,{"y":null}],"a":true},"q":"he said \"hi\" \\ back\nslash\ttab"}`

// TestTurnExecutesEachVendorShape: for each vendor and each era, Open lists
// the fixture's catalogue from the answer's own bytes, and Execute sends the
// public and the private read and a call under an unlisted name; the server
// receives the vendor's argument bytes unchanged and the name as the
// catalogue maps it (or as written), and each Observation carries the
// vendor call id beside the server's callId.
func TestTurnExecutesEachVendorShape(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		f := newFixture(t)
		turn := open(t, f, version)
		if version == "" && turn.ProtocolVersion() != mcp.LATEST_PROTOCOL_VERSION {
			t.Errorf("default era negotiated %q, want %q", turn.ProtocolVersion(), mcp.LATEST_PROTOCOL_VERSION)
		}
		tl := turn.Tools()
		if len(tl) != 1 || tl[0].Name != "files.read" || string(tl[0].InputSchema) != fixtureSchema {
			t.Fatalf("era %q: tools = %+v, want files.read with its schema's bytes %s", version, tl, fixtureSchema)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wantWire []string
		var wantNames []string
		for _, v := range driver.Vendors() {
			cat, err := turn.Catalogue(v)
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				id, name, args, status, tool string
			}{
				{string(v) + "-1", "files_read", trickyArgs, "succeeded", "files.read"},
				{string(v) + "-2", "files_read", `{"path":"/private/a.txt"}`, "denied", "files.read"},
				{string(v) + "-3", "github_search", `{"q":"x"}`, "", "github_search"},
			}
			for _, s := range steps {
				item := vendorItem(v, s.id, s.name, s.args)
				result, obs, err := turn.Execute(ctx, cat, item)
				if s.tool == "github_search" {
					// Unknown to the fixture: mcp-go's server answers a
					// JSON-RPC error. The call was still sent as written.
					if err == nil {
						t.Errorf("%s: unlisted tool: no error from a server that does not know it", v)
					}
				} else if err != nil {
					t.Fatalf("%s %s: %v", v, s.id, err)
				}
				wantWire, wantNames = append(wantWire, s.args), append(wantNames, s.tool)
				if s.status == "" {
					continue
				}
				if obs.VendorCallID != s.id || obs.Tool != s.tool || obs.Status != s.status || obs.CallID == "" || !obs.Outcome {
					t.Errorf("%s %s: observation %+v", v, s.id, obs)
				}
				if !json.Valid(result) || !bytes.Contains(result, []byte(`"`+s.id+`"`)) {
					t.Errorf("%s %s: result %s does not answer the call", v, s.id, result)
				}
				if s.status == "denied" && !bytes.Contains(result, []byte("denied: role engineer may not read /private/a.txt")) {
					t.Errorf("%s: denied result %s", v, result)
				}
			}
		}
		wire, names := f.received()
		if len(wire) != len(wantWire) {
			t.Fatalf("era %q: the server received %d calls, want %d", version, len(wire), len(wantWire))
		}
		for i := range wire {
			if string(wire[i]) != wantWire[i] || names[i] != wantNames[i] {
				t.Errorf("era %q call %d: the server received %s %s, want %s %s byte for byte", version, i, names[i], wire[i], wantNames[i], wantWire[i])
			}
		}
	}
}

// TestArgumentsOnTheWire: what mcp-go's encoding of the request does to
// arguments the driver passes on unchanged — whitespace outside strings is
// compacted and <, >, & become \u escapes — and nothing else.
func TestArgumentsOnTheWire(t *testing.T) {
	f := newFixture(t)
	turn := open(t, f, "")
	cat, err := turn.Catalogue(driver.Anthropic)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := `{ "path" : "/public/<a>&b.txt" ,	"n": [ 1 , 2.50 ] }`
	if _, _, err := turn.Execute(ctx, cat, vendorItem(driver.Anthropic, "w1", "files_read", args)); err != nil {
		t.Fatal(err)
	}
	wire, _ := f.received()
	var want bytes.Buffer
	if err := json.Compact(&want, []byte(args)); err != nil {
		t.Fatal(err)
	}
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, want.Bytes())
	if len(wire) != 1 || string(wire[0]) != escaped.String() {
		t.Errorf("wire arguments %s, want %s", wire, escaped.String())
	}
}

// TestInvalidArgumentsAreAnsweredNotSent: arguments that are not a JSON
// object are answered in the vendor's shape as an error, reported as
// ErrInvalidArguments, and never reach the server.
func TestInvalidArgumentsAreAnsweredNotSent(t *testing.T) {
	f := newFixture(t)
	turn := open(t, f, "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range driver.Vendors() {
		cat, err := turn.Catalogue(v)
		if err != nil {
			t.Fatal(err)
		}
		item := vendorItem(v, "bad-1", "files_read", `[1]`)
		if v == driver.OpenAIResponses {
			item = []byte(`{"type":"function_call","call_id":"bad-1","name":"files_read","arguments":"{\"path\":"}`)
		}
		result, obs, err := turn.Execute(ctx, cat, item)
		if !errors.Is(err, driver.ErrInvalidArguments) {
			t.Errorf("%s: error %v, want ErrInvalidArguments", v, err)
		}
		if !json.Valid(result) || !bytes.Contains(result, []byte(`"bad-1"`)) || !bytes.Contains(result, []byte("failed: the call was not sent")) {
			t.Errorf("%s: answer %s", v, result)
		}
		if obs.VendorCallID != "bad-1" || obs.Tool != "files.read" || obs.Status != "" {
			t.Errorf("%s: observation %+v", v, obs)
		}
	}
	if wire, _ := f.received(); len(wire) != 0 {
		t.Errorf("the server received %d calls, want none", len(wire))
	}
}

// TestOpenRefusesAWrongBearer: the token is what authenticates the turn.
func TestOpenRefusesAWrongBearer(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if turn, err := driver.Open(ctx, f.url, "wrong", driver.Options{}); err == nil {
		turn.Close()
		t.Fatal("Open with a wrong bearer token succeeded")
	}
}

// vendorItem is a tool-call item of vendor v with args as the model wrote
// them.
func vendorItem(v driver.Vendor, id, name, args string) []byte {
	qid, _ := json.Marshal(id)
	qn, _ := json.Marshal(name)
	switch v {
	case driver.Anthropic:
		return []byte(`{"type":"tool_use","id":` + string(qid) + `,"name":` + string(qn) + `,"input":` + args + `}`)
	case driver.OpenAIResponses:
		qa, _ := json.Marshal(args)
		return []byte(`{"type":"function_call","id":"fc_1","call_id":` + string(qid) + `,"name":` + string(qn) + `,"arguments":` + string(qa) + `,"status":"completed"}`)
	default:
		return []byte(`{"type":"toolCall","id":` + string(qid) + `,"name":` + string(qn) + `,"arguments":` + args + `}`)
	}
}
