package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Model is a vendor endpoint a Loop asks: an Anthropic-Messages- or
// OpenAI-Responses-compatible API, non-streaming. What model runs there is
// the host's to configure; the driver sends Name and selects nothing.
type Model struct {
	// Vendor is Anthropic (POST {BaseURL}/v1/messages) or OpenAIResponses
	// (POST {BaseURL}/v1/responses). pi-ai has no endpoint of its own.
	Vendor Vendor
	// BaseURL is the endpoint's base, e.g. https://api.anthropic.com or
	// https://api.openai.com/v1 (a trailing /v1 is not doubled).
	BaseURL string
	// Credential is the API key, sent as x-api-key (Anthropic) or as
	// Authorization: Bearer (OpenAI); "" sends none. It is never logged or
	// put in an error.
	Credential string
	// Name is the declared model string, sent as "model".
	Name string
	// MaxTokens bounds each Anthropic answer (max_tokens, which the
	// Messages API requires); default 1024.
	MaxTokens int
	// HTTPClient carries the requests (nil: http.DefaultClient).
	HTTPClient *http.Client
}

// Loop is a turn loop with a live model (the live column): it gives the
// model the turn's catalogue in the vendor's shape and the prompt, executes
// each tool call the model makes on the turn, sends the results back, and
// stops at the model's final answer or after MaxSteps model requests.
type Loop struct {
	Turn  *Turn
	Model Model
	// MaxSteps bounds the model requests of one Run (default 8).
	MaxSteps int
}

// Stop reasons of a Transcript.
const (
	// StopFinal: the model answered without a tool call.
	StopFinal = "final"
	// StopMaxSteps: the model still called tools after MaxSteps requests.
	StopMaxSteps = "max_steps"
)

// Transcript is what one Run did.
type Transcript struct {
	// Observations are the model's tool calls in the order it made them,
	// those with invalid arguments (not sent, no Status) included.
	Observations []Observation `json:"observations"`
	// InvalidArguments counts the calls whose arguments were not a JSON
	// object: answered to the model as errors, never sent to the turn.
	InvalidArguments int `json:"invalidArguments"`
	// Steps is the number of model requests made.
	Steps int `json:"steps"`
	// Stop is StopFinal or StopMaxSteps ("" when Run failed).
	Stop string `json:"stop"`
	// Final is the text of the model's final answer.
	Final string `json:"final"`
}

const defaultMaxSteps = 8

// Run runs the loop for prompt. On an error — the model endpoint failing
// or answering outside its shape, a tool call not of the vendor's shape, a
// tools/call the turn could not process — it stops and returns the
// transcript so far with the error.
func (l *Loop) Run(ctx context.Context, prompt string) (*Transcript, error) {
	tr := &Transcript{}
	if l.Model.Vendor != Anthropic && l.Model.Vendor != OpenAIResponses {
		return tr, fmt.Errorf("loop: model vendor %q: must be %q or %q (pi-ai talks to one of those)", l.Model.Vendor, Anthropic, OpenAIResponses)
	}
	cat, err := l.Turn.Catalogue(l.Model.Vendor)
	if err != nil {
		return tr, fmt.Errorf("loop: %w", err)
	}
	maxSteps := l.MaxSteps
	if maxSteps <= 0 {
		maxSteps = defaultMaxSteps
	}
	conv := newConversation(l.Model, prompt)
	for tr.Steps < maxSteps {
		tr.Steps++
		out, err := l.Model.post(ctx, conv.request(cat))
		if err != nil {
			return tr, fmt.Errorf("loop step %d: %w", tr.Steps, err)
		}
		calls, final, err := conv.answer(out)
		if err != nil {
			return tr, fmt.Errorf("loop step %d: %s answer: %w", tr.Steps, l.Model.Vendor, err)
		}
		if len(calls) == 0 {
			tr.Stop, tr.Final = StopFinal, final
			return tr, nil
		}
		results := make([]json.RawMessage, 0, len(calls))
		for _, item := range calls {
			result, obs, err := l.Turn.Execute(ctx, cat, item)
			if errors.Is(err, ErrInvalidArguments) {
				tr.InvalidArguments++
			} else if err != nil {
				return tr, fmt.Errorf("loop step %d: %w", tr.Steps, err)
			}
			tr.Observations = append(tr.Observations, obs)
			results = append(results, result)
		}
		conv.results(results)
	}
	tr.Stop = StopMaxSteps
	return tr, nil
}

// conversation is the request history of one Run in the vendor's shape.
type conversation struct {
	m Model
	// history: Anthropic messages, or Responses input items.
	history []json.RawMessage
}

func newConversation(m Model, prompt string) *conversation {
	var first object
	first.str("role", "user").str("content", prompt)
	return &conversation{m: m, history: []json.RawMessage{first.bytes()}}
}

func (c *conversation) request(cat *Catalogue) json.RawMessage {
	var o object
	o.str("model", c.m.Name)
	switch c.m.Vendor {
	case Anthropic:
		maxTokens := c.m.MaxTokens
		if maxTokens <= 0 {
			maxTokens = 1024
		}
		o.raw("max_tokens", fmt.Appendf(nil, "%d", maxTokens)).raw("tools", cat.DefinitionsJSON()).raw("messages", array(c.history))
	default:
		o.raw("tools", cat.DefinitionsJSON()).raw("input", array(c.history))
	}
	return o.bytes()
}

// answer records the model's answer in the history and returns its tool
// calls (items of the vendor's call shape) or, when there are none, the
// text of its final answer.
func (c *conversation) answer(body []byte) (calls []json.RawMessage, final string, err error) {
	field := "output"
	if c.m.Vendor == Anthropic {
		field = "content"
	}
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, "", fmt.Errorf("not a JSON object: %w", err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(resp[field], &items); err != nil || items == nil {
		return nil, "", fmt.Errorf("field %q: want an array", field)
	}
	var texts []string
	for _, it := range items {
		var head struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if err := json.Unmarshal(it, &head); err != nil {
			return nil, "", fmt.Errorf("field %q: an item that is not an object: %w", field, err)
		}
		switch {
		case c.m.Vendor == Anthropic && head.Type == "tool_use", c.m.Vendor == OpenAIResponses && head.Type == "function_call":
			calls = append(calls, it)
		case c.m.Vendor == Anthropic && head.Type == "text":
			texts = append(texts, head.Text)
		case c.m.Vendor == OpenAIResponses && head.Type == "message":
			for _, p := range head.Content {
				if p.Type == "output_text" {
					texts = append(texts, p.Text)
				}
			}
		}
	}
	if c.m.Vendor == Anthropic {
		var msg object
		msg.str("role", "assistant").raw("content", resp[field])
		c.history = append(c.history, msg.bytes())
	} else {
		// Every output item goes back as input, as the Responses API takes
		// a conversation without server-side state.
		c.history = append(c.history, items...)
	}
	return calls, strings.Join(texts, "\n"), nil
}

// results adds the answers to one step's tool calls to the history.
func (c *conversation) results(results []json.RawMessage) {
	if c.m.Vendor == Anthropic {
		var msg object
		msg.str("role", "user").raw("content", array(results))
		c.history = append(c.history, msg.bytes())
		return
	}
	c.history = append(c.history, results...)
}

// endpoint is the URL a request of m goes to.
func (m Model) endpoint() string {
	base := strings.TrimRight(m.BaseURL, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	if m.Vendor == Anthropic {
		return base + "/messages"
	}
	return base + "/responses"
}

// maxErrorBody is how much of an endpoint's error answer an error quotes.
const maxErrorBody = 512

func (m Model) post(ctx context.Context, body []byte) ([]byte, error) {
	url := m.endpoint()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("model endpoint %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if m.Vendor == Anthropic {
		req.Header.Set("anthropic-version", "2023-06-01")
		if m.Credential != "" {
			req.Header.Set("x-api-key", m.Credential)
		}
	} else if m.Credential != "" {
		req.Header.Set("Authorization", "Bearer "+m.Credential)
	}
	hc := m.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("model endpoint %s: %w", url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("model endpoint %s: reading the answer: %w", url, err)
	}
	if resp.StatusCode/100 != 2 {
		if len(out) > maxErrorBody {
			out = append(out[:maxErrorBody:maxErrorBody], "…"...)
		}
		return nil, fmt.Errorf("model endpoint %s: HTTP %d: %s", url, resp.StatusCode, out)
	}
	return out, nil
}
