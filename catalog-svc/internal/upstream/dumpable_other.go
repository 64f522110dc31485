//go:build !linux

package upstream

// ProtectFromChildren changes nothing elsewhere than Linux (where
// catalog-svc's images run): there a stdio upstream, of the same user, may
// still read this process's environment or attach to it by that system's
// own means.
func ProtectFromChildren() error { return nil }
