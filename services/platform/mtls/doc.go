// Package mtls is the internal plane's transport security: every gRPC
// server and client of SharedOS speaks TLS 1.3 with client certificates
// (ADR 0012). A peer's identity is the SPIFFE ID in its certificate's URI SAN,
// spiffe://<trust-domain>/<role>/<name>; servers admit a method's caller only
// when its role is in the callers table (services/contract/callers).
//
// Certificates and the trust bundle are PEM files (--tls-cert, --tls-key,
// --tls-ca), re-read when they change (grpc-go's pemfile certificate
// provider) so a rotation needs no restart and drops no call. Plaintext runs
// only when asked for (--insecure-plaintext) and only on loopback.
package mtls
