package mcpserver

import (
	"slices"
	"strings"
	"testing"
)

// TestSessionIDsCarryCapabilities: a session id carries the input
// capabilities its initialize declared, under the MAC: widening them, or
// moving the id to another turn, makes it invalid; ids of the first format
// (no capabilities) stay valid. An id checked once is answered again from
// the last check, with its own capabilities, and no other id is.
func TestSessionIDsCarryCapabilities(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	s := &sessionIDs{turnID: "turn-a", key: key, caps: []string{"sampling", "elicitation", "experimental"}}
	id := s.Generate()
	caps, err := s.capabilities(id)
	if err != nil || !slices.Equal(caps, []string{"elicitation", "sampling"}) {
		t.Fatalf("capabilities(%s) = %v, %v", id, caps, err)
	}
	parts := strings.Split(strings.TrimPrefix(id, sessionPrefix), ".")
	widened := sessionPrefix + parts[0] + ".ers." + parts[2]
	if _, err := s.capabilities(widened); err == nil {
		t.Error("an id with widened capabilities was accepted")
	}
	other := &sessionIDs{turnID: "turn-b", key: key}
	if _, err := other.Validate(id); err == nil {
		t.Error("another turn accepted the id")
	}
	v1 := sessionPrefixV1 + "abc." + s.mac("abc")
	if caps, err := s.capabilities(v1); err != nil || caps != nil {
		t.Errorf("a first-format id: %v, %v", caps, err)
	}
	// A v2 id spelled as a v1 one ("random|caps" as the random part) has
	// the same mac input: refused, or a session ended with DELETE would
	// come back under another spelling.
	if _, err := s.capabilities(sessionPrefixV1 + parts[0] + "|" + parts[1] + "." + parts[2]); err == nil {
		t.Error("a v2 id respelled as a v1 id was accepted")
	}
	none := (&sessionIDs{turnID: "turn-a", key: key}).Generate()
	if caps, err := s.capabilities(none); err != nil || len(caps) != 0 {
		t.Errorf("an id without capabilities: %v, %v", caps, err)
	}

	_, _ = s.capabilities(id)
	caps, _ = s.capabilities(id) // from the last check
	caps[0] = "roots"            // the caller's copy
	for range 2 {
		if again, err := s.capabilities(id); err != nil || !slices.Equal(again, []string{"elicitation", "sampling"}) {
			t.Errorf("capabilities(%s) again = %v, %v", id, again, err)
		}
	}
	forged := id[:len(id)-1] + map[bool]string{true: "A", false: "B"}[!strings.HasSuffix(id, "A")]
	if _, err := s.capabilities(forged); err == nil {
		t.Error("an id with another mac was accepted after the valid one was checked")
	}
	if _, err := s.Validate(widened); err == nil {
		t.Error("the widened id was accepted after the valid one was checked")
	}
}
