package driver

import (
	"testing"
)

// TestCaptureReadsAnEventStream: a tools/list answered as an event stream
// (a notification first, CRLF line ends, data split over two lines) yields
// the result of the response event.
func TestCaptureReadsAnEventStream(t *testing.T) {
	cp := &capture{contentType: "text/event-stream; charset=utf-8"}
	cp.body.WriteString("event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\n" +
		": comment\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\ndata: \"result\":{\"tools\":[{\"name\":\"a.b\",\"inputSchema\":{\"z\":1,\"a\":2}}]}}\n\n")
	got, err := cp.result()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"tools":[{"name":"a.b","inputSchema":{"z":1,"a":2}}]}`; string(got) != want {
		t.Errorf("result %s, want %s", got, want)
	}
	for _, ct := range []string{"text/html", ""} {
		cp := &capture{contentType: ct}
		if _, err := cp.result(); err == nil {
			t.Errorf("Content-Type %q: no error", ct)
		}
	}
	cp = &capture{contentType: "application/json"}
	cp.body.WriteString(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`)
	if _, err := cp.result(); err == nil {
		t.Error("an error answer gave a result")
	}
}
