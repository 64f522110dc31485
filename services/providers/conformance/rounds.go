package conformance

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
)

// Input-round fixtures (2026-07-28 input-required results, SEP-2322;
// contract v3), named and shaped exactly as the suite calls them.
const (
	ToolInputElicitation  = "test_input_required_result_elicitation"
	ToolInputSampling     = "test_input_required_result_sampling"
	ToolInputListRoots    = "test_input_required_result_list_roots"
	ToolInputRequestState = "test_input_required_result_request_state"
	ToolInputMultiple     = "test_input_required_result_multiple_inputs"
	ToolInputMultiRound   = "test_input_required_result_multi_round"
	ToolInputTampered     = "test_input_required_result_tampered_state"
	ToolInputCapabilities = "test_input_required_result_capabilities"
	// ToolMissingCapability always needs sampling: a client that did not
	// declare it is refused -32021 (SEP-2575), by the kernel and bridge.
	ToolMissingCapability = "test_missing_capability"
	// The 2025-era scenarios' tools: the bridge asks a session's client
	// with server-to-client requests (on 2026-07-28 they are input rounds
	// like the others).
	ToolElicitation         = "test_elicitation"
	ToolSampling            = "test_sampling"
	ToolElicitationDefaults = "test_elicitation_sep1034_defaults"
	ToolElicitationEnums    = "test_elicitation_sep1330_enums"
)

const (
	messageSchema = `{"type":"object","properties":{"message":{"type":"string"}},"required":["message"],"additionalProperties":false}`
	promptSchema  = `{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"],"additionalProperties":false}`
	// defaultsSchema and enumsSchema are SEP-1034's and SEP-1330's
	// requested schemas, exactly as the suite checks them.
	defaultsSchema = `{"type":"object","properties":{"name":{"type":"string","default":"John Doe"},"age":{"type":"integer","default":30},"score":{"type":"number","default":95.5},"status":{"type":"string","enum":["active","inactive","pending"],"default":"active"},"verified":{"type":"boolean","default":true}}}`
	enumsSchema    = `{"type":"object","properties":{"untitledSingle":{"type":"string","enum":["option1","option2","option3"]},"titledSingle":{"type":"string","oneOf":[{"const":"value1","title":"First Option"},{"const":"value2","title":"Second Option"},{"const":"value3","title":"Third Option"}]},"legacyEnum":{"type":"string","enum":["opt1","opt2","opt3"],"enumNames":["Option One","Option Two","Option Three"]},"untitledMulti":{"type":"array","items":{"type":"string","enum":["option1","option2","option3"]}},"titledMulti":{"type":"array","items":{"anyOf":[{"const":"value1","title":"First Choice"},{"const":"value2","title":"Second Choice"},{"const":"value3","title":"Third Choice"}]}}}}`
)

// Input requests the fixtures ask with.
const (
	askName    = `{"method":"elicitation/create","params":{"message":"What is your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`
	askCapital = `{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"What is the capital of France?"}}],"maxTokens":100}}`
	askRoots   = `{"method":"roots/list","params":{}}`
	askConfirm = `{"method":"elicitation/create","params":{"message":"Please confirm","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}}}`
	askGreet   = `{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"Generate a greeting"}}],"maxTokens":50}}`
	askStep1   = `{"method":"elicitation/create","params":{"message":"Step 1: What is your name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}`
	askStep2   = `{"method":"elicitation/create","params":{"message":"Step 2: What is your favorite color?","requestedSchema":{"type":"object","properties":{"color":{"type":"string"}},"required":["color"]}}}`
)

// stateOK is the provider state the request-state fixtures keep; round 2
// answers "state-ok" only when it comes back.
const stateOK = "conformance-state-v1"

var inputFixtures = []Tool{
	{ToolInputElicitation, "Asks the user's name (input required), then greets them.", json.RawMessage(emptyObject)},
	{ToolInputSampling, "Asks the client's model a question (input required), then answers with it.", json.RawMessage(emptyObject)},
	{ToolInputListRoots, "Asks the client's roots (input required), then lists them.", json.RawMessage(emptyObject)},
	{ToolInputRequestState, "Asks for a confirmation with a request state, then checks it.", json.RawMessage(emptyObject)},
	{ToolInputMultiple, "Asks for a name, a greeting and the roots at once.", json.RawMessage(emptyObject)},
	{ToolInputMultiRound, "Asks in two rounds: a name, then a colour.", json.RawMessage(emptyObject)},
	{ToolInputTampered, "Asks for a confirmation with an integrity-protected request state.", json.RawMessage(emptyObject)},
	{ToolInputCapabilities, "Asks only for what the client declared it can answer.", json.RawMessage(emptyObject)},
	{ToolMissingCapability, "Needs sampling, whether or not the client declared it.", json.RawMessage(emptyObject)},
	{ToolElicitation, "Asks the user for a username and an email, showing message.", json.RawMessage(messageSchema)},
	{ToolSampling, "Asks the client's model to answer prompt.", json.RawMessage(promptSchema)},
	{ToolElicitationDefaults, "Asks for values with defaults of every primitive type (SEP-1034).", json.RawMessage(emptyObject)},
	{ToolElicitationEnums, "Asks with every enum schema variant (SEP-1330).", json.RawMessage(emptyObject)},
}

// elicit is an elicitation/create input request of message and schema.
func elicit(message, schema string) string {
	m, _ := json.Marshal(message)
	return `{"method":"elicitation/create","params":{"message":` + string(m) + `,"requestedSchema":` + schema + `}}`
}

// argument is the string argument key of req ("" when absent).
func argument(req *sharedosv1.HandleRequest, key string) string {
	var m map[string]any
	_ = json.Unmarshal(req.GetArgumentsJson(), &m)
	v, _ := m[key].(string)
	return v
}

// ask is an input_required answer with requests (key → request JSON).
func ask(state string, requests ...string) *sharedosv1.HandleResponse {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(requests); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:%s", requests[i], requests[i+1])
	}
	b.WriteByte('}')
	return &sharedosv1.HandleResponse{InputRequired: &sharedosv1.InputRequired{
		InputRequestsJson: []byte(b.String()), RequestState: []byte(state),
	}}
}

func text(s string) *sharedosv1.HandleResponse {
	b, _ := json.Marshal([]map[string]any{{"type": "text", "text": s}})
	return &sharedosv1.HandleResponse{ContentJson: b}
}

// roundAnswer is an input fixture's answer to req, or nil for another tool.
func roundAnswer(req *sharedosv1.HandleRequest) *sharedosv1.HandleResponse {
	var got map[string]json.RawMessage
	_ = json.Unmarshal(req.GetInputResponsesJson(), &got) // the kernel checked its shape
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := got[k]; !ok {
				return false
			}
		}
		return true
	}
	state := string(req.GetRequestState())
	switch req.GetTool() {
	case ToolInputElicitation:
		if !has("user_name") {
			return ask("", "user_name", askName)
		}
		var a struct {
			Content struct {
				Name string `json:"name"`
			} `json:"content"`
		}
		_ = json.Unmarshal(got["user_name"], &a)
		return text("Hello, " + a.Content.Name + "!")
	case ToolInputSampling:
		if !has("capital_question") {
			return ask("", "capital_question", askCapital)
		}
		var a struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(got["capital_question"], &a)
		return text("The model said: " + a.Content.Text)
	case ToolInputListRoots:
		if !has("client_roots") {
			return ask("", "client_roots", askRoots)
		}
		var a struct {
			Roots []struct {
				URI string `json:"uri"`
			} `json:"roots"`
		}
		_ = json.Unmarshal(got["client_roots"], &a)
		uris := make([]string, 0, len(a.Roots))
		for _, r := range a.Roots {
			uris = append(uris, r.URI)
		}
		return text("Roots: " + strings.Join(uris, ", "))
	case ToolInputRequestState, ToolInputTampered:
		if !has("confirm") || state != stateOK {
			return ask(stateOK, "confirm", askConfirm)
		}
		return text("Confirmed: state-ok")
	case ToolInputMultiple:
		if !has("user_name", "greeting", "client_roots") || state != stateOK {
			return ask(stateOK, "user_name", askName, "greeting", askGreet, "client_roots", askRoots)
		}
		return text("All three inputs received.")
	case ToolInputMultiRound:
		switch {
		case state == "round-1" && has("step1"):
			return ask("round-2", "step2", askStep2)
		case state == "round-2" && has("step2"):
			return text("Both rounds completed.")
		}
		return ask("round-1", "step1", askStep1)
	case ToolInputCapabilities:
		methods := req.GetInputMethods()
		var reqs []string
		if slices.Contains(methods, "sampling/createMessage") && !has("capital_question") {
			reqs = append(reqs, "capital_question", askCapital)
		}
		if slices.Contains(methods, "elicitation/create") && !has("user_name") {
			reqs = append(reqs, "user_name", askName)
		}
		if len(reqs) == 0 {
			return text("Nothing left to ask for.")
		}
		return ask("", reqs...)
	case ToolMissingCapability:
		if !has("capital_question") {
			return ask("", "capital_question", askCapital)
		}
		return text("Sampled.")
	case ToolElicitation:
		if !has("user") {
			return ask("", "user", elicit(argument(req, "message"),
				`{"type":"object","properties":{"username":{"type":"string","description":"User's response"},"email":{"type":"string","description":"User's email address"}},"required":["username","email"]}`))
		}
		return text("User response: " + string(got["user"]))
	case ToolSampling:
		if !has("answer") {
			p, _ := json.Marshal(argument(req, "prompt"))
			return ask("", "answer", `{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":`+string(p)+`}}],"maxTokens":100}}`)
		}
		var a struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(got["answer"], &a)
		return text("LLM response: " + a.Content.Text)
	case ToolElicitationDefaults, ToolElicitationEnums:
		if !has("values") {
			schema := defaultsSchema
			if req.GetTool() == ToolElicitationEnums {
				schema = enumsSchema
			}
			return ask("", "values", elicit("Please review and update the form fields", schema))
		}
		var a struct {
			Action  string          `json:"action"`
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(got["values"], &a)
		return text("Elicitation completed: action=" + a.Action + ", content=" + string(a.Content))
	}
	return nil
}
