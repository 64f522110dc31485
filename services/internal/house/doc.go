// Package house holds checks on the source tree itself: each fact that
// crosses services has one owner (ADR 0008), and these tests fail when a
// second definition appears. It has no code of its own.
package house
