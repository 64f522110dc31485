// Package redact keeps call arguments out of text bound for records and logs.
//
// A policy's reason is written for the model and may quote a resource built
// from the arguments ("role engineer may not read /private/a.txt"). The
// model gets that text; operation records and decision logs get it with
// every argument-derived value replaced by a short digest, so argument
// values appear there only as digests (ARCHITECTURE.md, invariant 11) while
// equal values stay recognisably equal.
package redact
