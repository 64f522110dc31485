package mtls

import (
	"flag"
	"time"

	"github.com/sharedos/toolshare/services/platform/config"
)

// DefaultRefresh is how often the certificate files are re-read.
const DefaultRefresh = 5 * time.Second

// Config is the transport security of one process.
type Config struct {
	CA, Cert, Key string // PEM files: trust bundle, own certificate chain, own key
	// InsecurePlaintext runs without TLS (loopback listeners only); no
	// caller has an identity then, so the callers table is not enforced.
	InsecurePlaintext bool
	// Refresh is how often the files are re-read (0: DefaultRefresh).
	Refresh time.Duration
}

// Bind registers --tls-ca, --tls-cert, --tls-key and --insecure-plaintext
// (env SHAREDOS_TLS_CA, ...) on fs; defaults fill empty file flags (a tool
// that finds a local identity passes it here).
func Bind(fs *flag.FlagSet, defaults Config) func() Config {
	ca := config.String(fs, "tls-ca", defaults.CA, "PEM trust bundle: the CA(s) that sign every internal peer's certificate")
	cert := config.String(fs, "tls-cert", defaults.Cert, "PEM certificate chain of this process (URI SAN spiffe://<trust-domain>/<role>/<name>)")
	key := config.String(fs, "tls-key", defaults.Key, "PEM private key of --tls-cert")
	plain := config.Bool(fs, "insecure-plaintext", false, "run the internal gRPC plane without TLS (loopback only; every caller trusted)")
	return func() Config {
		return Config{CA: *ca, Cert: *cert, Key: *key, InsecurePlaintext: *plain}
	}
}
