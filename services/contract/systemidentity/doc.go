// Package systemidentity owns the facts that make two runs comparable
// (ADR 0014, SystemIdentity): the ToolPolicy's digest and the names of a
// harness's MCP support. The catalogHash is cataloghash's; the harness name,
// version and declared model are the host's strings, recorded as given.
//
// The kernel signs these into a turn's grant and every operation record of
// the turn carries them from there; sharedosctl compares columns by them.
package systemidentity
