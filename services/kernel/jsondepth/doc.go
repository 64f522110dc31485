// Package jsondepth measures how deeply a JSON document nests, with a byte
// scan that stops as soon as a cap is passed. Every edge that bounds
// nesting (the bridge for whole requests, authz-svc for arguments) asks it
// before any JSON parser runs: encoding/json recurses per level and gives up
// only at 10,000, so a 100,000-deep body must be refused without parsing it.
package jsondepth
