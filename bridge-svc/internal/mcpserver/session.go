package mcpserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/server"
)

// sessionIDs mints and checks legacy (2025-x) Mcp-Session-Id values for one
// turn. A session id is "<random>.<caps>.<mac>" with mac =
// HMAC-SHA256(key, turnID "|" random "|" caps): any pod can check it from
// the lease alone (the key is the lease's token hash, which every pod reads
// from the store), and an id minted for turn A fails on turn B. (The key
// is derived from the token: a holder of the token could mint an id, as it
// could initialize a session — it gains nothing the token does not give.)
// caps are the input capabilities the client declared at
// initialize (one letter each: e elicitation, r roots, s sampling), which
// the session's calls may use for input rounds (ADR 0017); the mac makes
// them as unforgeable as the id. It is a handle, never a credential: every
// request still carries the turn's bearer.
type sessionIDs struct {
	turnID string
	key    []byte
	// caps is what Generate mints into the id (the initialize's).
	caps []string
	// checked is the last id found valid, with its capabilities: a
	// 2025-era call's id is checked two or three times (mcp-go's Validate,
	// the input capabilities, the gate), an HMAC each time, and a turn's
	// calls mostly share one session.
	checked atomic.Pointer[checkedID]
}

// checkedID is an id capabilities found valid, and what it carries.
type checkedID struct {
	id   string
	caps []string
}

var _ server.SessionIdManager = (*sessionIDs)(nil)

// sessionPrefix is the current format; sessionPrefixV1 ids ("<random>.<mac>",
// no capabilities) are still valid until their turn closes.
const (
	sessionPrefix   = "mcp-s2-"
	sessionPrefixV1 = "mcp-s1-"
)

var errBadSession = errors.New("session id not issued for this turn")

// capLetters are the capabilities a session id carries, by letter.
var capLetters = []struct{ letter, capability string }{{"e", "elicitation"}, {"r", "roots"}, {"s", "sampling"}}

func (s *sessionIDs) mac(parts ...string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(s.turnID))
	for _, p := range parts {
		m.Write([]byte{'|'})
		m.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// Generate implements server.SessionIdManager.
func (s *sessionIDs) Generate() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	r := base64.RawURLEncoding.EncodeToString(b[:])
	var caps strings.Builder
	for _, c := range capLetters {
		if slices.Contains(s.caps, c.capability) {
			caps.WriteString(c.letter)
		}
	}
	return sessionPrefix + r + "." + caps.String() + "." + s.mac(r, caps.String())
}

// Validate implements server.SessionIdManager. Termination is tracked by
// the lease (Handler.terminate), not here.
func (s *sessionIDs) Validate(id string) (bool, error) {
	_, err := s.capabilities(id)
	return false, err
}

// capabilities checks id and returns the input capabilities it carries.
func (s *sessionIDs) capabilities(id string) ([]string, error) {
	if c := s.checked.Load(); c != nil && subtle.ConstantTimeCompare([]byte(c.id), []byte(id)) == 1 {
		return slices.Clone(c.caps), nil
	}
	caps, err := s.check(id)
	if err == nil {
		s.checked.Store(&checkedID{id: id, caps: caps})
	}
	return slices.Clone(caps), err
}

// check verifies id's mac and reads its capabilities.
func (s *sessionIDs) check(id string) ([]string, error) {
	if rest, ok := strings.CutPrefix(id, sessionPrefixV1); ok {
		r, mac, ok := strings.Cut(rest, ".")
		if !ok || !randomPart(r) || !hmac.Equal([]byte(mac), []byte(s.mac(r))) {
			return nil, errBadSession
		}
		return nil, nil
	}
	rest, ok := strings.CutPrefix(id, sessionPrefix)
	if !ok {
		return nil, errBadSession
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || !randomPart(parts[0]) || !hmac.Equal([]byte(parts[2]), []byte(s.mac(parts[0], parts[1]))) {
		return nil, errBadSession
	}
	var caps []string
	for _, c := range capLetters {
		if strings.Contains(parts[1], c.letter) {
			caps = append(caps, c.capability)
		}
	}
	return caps, nil
}

// randomPart reports whether r can be an id's random part, base64url as
// Generate writes it: nothing else may stand there, so no id reads as
// another — a v2 id's "random|caps" passed off as a v1 id's random part
// has the same mac input, and would bring a session ended with DELETE back
// under another spelling.
func randomPart(r string) bool {
	if r == "" {
		return false
	}
	for _, c := range []byte(r) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Terminate implements server.SessionIdManager: DELETE is accepted (Codex
// sends it on exit) and changes nothing the turn relies on.
func (s *sessionIDs) Terminate(id string) (bool, error) {
	_, err := s.Validate(id)
	return false, err
}

// ResolveSessionIdManager implements server.SessionIdManagerResolver: an
// initialize's manager mints the capabilities that request declared.
func (s *sessionIDs) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	if r == nil {
		return s
	}
	if st := stateFrom(r.Context()); st != nil && st.msg != nil && st.msg.Method == "initialize" {
		return &sessionIDs{turnID: s.turnID, key: s.key, caps: st.msg.ClientCapabilities}
	}
	return s
}
