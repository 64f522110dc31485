// Package jsonlimits owns the limits on JSON that SharedOS takes from a
// request — nesting depth, argument size, a number's length and range
// (CheckNumber) and how many values arguments hold — and the scans that
// check depth and counts before any parser runs. The bridge (whole JSON-RPC
// messages), the kernel (tool arguments) and authz-svc (arguments and
// annotations) all use these constants, so the three edges cannot disagree.
// encoding/json recurses per level and gives up only at 10,000, so a
// 100,000-deep body must be refused without parsing it.
package jsonlimits
