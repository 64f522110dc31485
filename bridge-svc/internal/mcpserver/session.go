package mcpserver

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/mark3labs/mcp-go/server"
)

// sessionIDs mints and checks legacy (2025-x) Mcp-Session-Id values for one
// turn. A session id is "<random>.<mac>" with mac = HMAC-SHA256(key,
// turnID "|" random): any pod can check it from the lease alone (the key is
// the lease's token hash, which every pod reads from the store and no client
// ever sees), and an id minted for turn A fails on turn B. It is a handle,
// never a credential: every request still carries the turn's bearer.
type sessionIDs struct {
	turnID string
	key    []byte
}

var _ server.SessionIdManager = (*sessionIDs)(nil)

const sessionPrefix = "mcp-s1-"

var errBadSession = errors.New("session id not issued for this turn")

func (s *sessionIDs) mac(random string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(s.turnID))
	m.Write([]byte{'|'})
	m.Write([]byte(random))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// Generate implements server.SessionIdManager.
func (s *sessionIDs) Generate() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	r := base64.RawURLEncoding.EncodeToString(b[:])
	return sessionPrefix + r + "." + s.mac(r)
}

// Validate implements server.SessionIdManager. Termination is not tracked:
// the turn's lifetime bounds every session, and closing the turn ends them
// all on every pod.
func (s *sessionIDs) Validate(id string) (bool, error) {
	rest, ok := strings.CutPrefix(id, sessionPrefix)
	if !ok {
		return false, errBadSession
	}
	r, mac, ok := strings.Cut(rest, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(s.mac(r))) {
		return false, errBadSession
	}
	return false, nil
}

// Terminate implements server.SessionIdManager: DELETE is accepted (Codex
// sends it on exit) and changes nothing the turn relies on.
func (s *sessionIDs) Terminate(id string) (bool, error) {
	_, err := s.Validate(id)
	return false, err
}
