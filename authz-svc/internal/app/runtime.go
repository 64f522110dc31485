package app

// GCPercent is the GOGC authz-svc serves with unless GOGC is set (see
// Command).
const GCPercent = 400
