package upstream_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/toolshare/catalog-svc/internal/upstream"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// rawLister is a 2025-06-18 Streamable HTTP upstream whose listings are
// the JSON it is given as it is: pages[method] are the entries of each
// page of method (a JSON array's members), every page but the last with
// a nextCursor.
type rawLister struct {
	pages map[string][]string
}

// fields names the array of each listing's result.
var fields = map[string]string{"tools/list": "tools", "prompts/list": "prompts", "resources/list": "resources",
	"resources/templates/list": "resourceTemplates"}

func (s rawLister) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Cursor string `json:"cursor"`
		} `json:"params"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if len(req.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	reply := func(member string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,`+member+`}`)
	}
	switch pages, listing := s.pages[req.Method]; {
	case req.Method == "initialize":
		reply(`"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"prompts":{},"resources":{}},"serverInfo":{"name":"raw","version":"1"}}`)
	case listing:
		i, _ := strconv.Atoi(strings.TrimPrefix(req.Params.Cursor, "page"))
		page := ""
		if i < len(pages) {
			page = pages[i]
		}
		next := ""
		if i+1 < len(pages) {
			next = `,"nextCursor":"page` + strconv.Itoa(i+1) + `"`
		}
		reply(`"result":{"` + fields[req.Method] + `":[` + page + `]` + next + `}`)
	case fields[req.Method] != "":
		reply(`"result":{}`)
	default:
		reply(`"error":{"code":-32601,"message":"Method not found"}`)
	}
}

// One entry of a listing SharedOS cannot read, or mcp-go could not type,
// fails no listing: the entry is skipped with why (status.skipped), every
// other tool, prompt and resource is acquired, over every page. An entry
// is read as SharedOS reads it: what it keeps of a tool (icons, execution)
// is not judged, what it registers is checked by the catalogue.
func TestOneUnreadableEntryIsSkippedAlone(t *testing.T) {
	for _, c := range []struct {
		name, tool string
		want       string // of the tool named bad: the skip reason's start, or "" when it is acquired
	}{
		{"annotations an array", `{"name":"bad","inputSchema":{"type":"object"},"annotations":[1]}`, "annotations: violates json_object"},
		{"inputSchema a string", `{"name":"bad","inputSchema":"x"}`, "inputSchema: violates object_schema"},
		{"properties an array", `{"name":"bad","inputSchema":{"type":"object","properties":[]}}`, "inputSchema: violates json_schema_2020_12"},
		{"required a string", `{"name":"bad","inputSchema":{"type":"object","required":"x"}}`, "inputSchema: violates json_schema_2020_12"},
		{"icons a string", `{"name":"bad","inputSchema":{"type":"object"},"icons":"x"}`, ""},
		{"taskSupport a number", `{"name":"bad","inputSchema":{"type":"object"},"execution":{"taskSupport":5}}`, ""},
		{"description a number", `{"name":"bad","description":5,"inputSchema":{"type":"object"}}`, "the upstream's definition cannot be read: its description is a JSON number"},
		{"not an object", `"bad"`, "the upstream's definition cannot be read: it is not an object"},
		{"the tool readable", `{"name":"bad","inputSchema":{"type":"object"}}`, ""}, // the prompts and resources alone unreadable
	} {
		t.Run(c.name, func(t *testing.T) {
			hs := httptest.NewServer(rawLister{pages: map[string][]string{
				"tools/list":               {`{"name":"ok","inputSchema":{"type":"object"}},` + c.tool, `{"name":"two","inputSchema":{"type":"object"}}`},
				"prompts/list":             {`{"name":"p"},{"name":"q","arguments":"x"}`, `{"name":"r"}`},
				"resources/list":           {`{"uri":"fx://a","name":"a"},{"uri":5,"name":"b"}`},
				"resources/templates/list": {`{"uriTemplate":"fx://t/{id}","name":"t"},{"uriTemplate":"fx://u/{id}","name":["u"]}`},
			}})
			t.Cleanup(hs.Close)
			h := newHarness(t, upstream.Guard{})
			rec, err := h.m.Add(t.Context(), &sharedosv1.UpstreamProvider{Namespace: "ls", Url: hs.URL, AutoApproveNew: true}, "op")
			if err != nil {
				t.Fatal(err)
			}
			st := rec.GetStatus()
			if st.GetError() != "" {
				t.Fatalf("status error %q", st.GetError())
			}
			var got []string
			for _, x := range st.GetTools() {
				got = append(got, x.GetName()+" "+upstream.StateName(x.GetState()))
			}
			for _, x := range st.GetEntries() {
				got = append(got, x.GetKind()+" "+x.GetKey()+" "+upstream.StateName(x.GetState()))
			}
			want := []string{"ls.ok published", "ls.two published", "prompt ls.p published", "prompt ls.r published",
				"resource fx://a published", "resource fx://t/{id} published"}
			if c.want == "" {
				want = append([]string{"ls.bad published"}, want...)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("acquired %v, want %v", got, want)
			}
			skipped := map[string]string{}
			for _, x := range st.GetSkipped() {
				skipped[x.GetKind()+" "+x.GetUpstreamName()] = x.GetReason()
			}
			wantSkipped := map[string]string{
				"prompt q":             "the upstream's definition cannot be read: its arguments is a JSON string",
				"resource fx://u/{id}": "the upstream's definition cannot be read: its name is a JSON array",
				"resource b":           "the upstream's definition cannot be read: its uri is a JSON number",
			}
			if c.want != "" {
				name := " bad"
				if c.tool == `"bad"` {
					name = " " // no name to tell
				}
				wantSkipped[name] = c.want
			}
			for k, why := range wantSkipped {
				if !strings.HasPrefix(skipped[k], why) {
					t.Errorf("%q skipped for %q, want %q", k, skipped[k], why)
				}
			}
			if len(skipped) != len(wantSkipped) {
				t.Errorf("skipped %v, want %d", skipped, len(wantSkipped))
			}
			for _, name := range []string{"ls.ok", "ls.two"} {
				if _, _, err := h.cat.Get(t.Context(), name); err != nil {
					t.Errorf("%s in the catalogue: %v", name, err)
				}
			}
		})
	}
}
