// Package pki makes throwaway certificate authorities and SPIFFE-identity
// certificates with the standard library (crypto/x509, ECDSA P-256): the
// local CA of `make run` and of the system tests, and the kernel's grant
// signing key beside it (WriteSigningKey). It is not a production
// CA; production certificates come from cert-manager or the operator.
package pki

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// TrustDomain is the trust domain of the local CA.
const TrustDomain = "sharedos.local"

// CA is a certificate authority held in memory.
type CA struct {
	TrustDomain string
	cert        *x509.Certificate
	key         *ecdsa.PrivateKey
	certPEM     []byte
}

// New makes a CA for trustDomain valid for validity.
func New(trustDomain string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "SharedOS local CA (" + trustDomain + ")"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		URIs:                  []*url.URL{{Scheme: "spiffe", Host: trustDomain}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{TrustDomain: trustDomain, cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// CertPEM is the CA certificate (the trust bundle).
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// WriteBundle writes the CA certificate to path (0644).
func (ca *CA) WriteBundle(path string) error {
	return os.WriteFile(path, ca.certPEM, 0o644)
}

// Leaf describes one certificate to issue.
type Leaf struct {
	Role, Name string
	// NotBefore/NotAfter default to now-1m and now+Validity.
	NotBefore, NotAfter time.Time
}

// Issue signs a certificate for spiffe://<trust domain>/<role>/<name>, usable
// as server and client (mutual TLS), with 127.0.0.1 and localhost as SANs for
// tools that check names, and returns its certificate and key PEM.
func (ca *CA) Issue(l Leaf) (certPEM, keyPEM []byte, err error) {
	if l.Role == "" || l.Name == "" {
		return nil, nil, errors.New("pki: a leaf needs a role and a name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	if l.NotBefore.IsZero() {
		l.NotBefore = now.Add(-time.Minute)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = ca.cert.NotAfter
	}
	id := &url.URL{Scheme: "spiffe", Host: ca.TrustDomain, Path: "/" + l.Role + "/" + l.Name}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.Name},
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{id},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// IssueFiles issues l into dir/<file>.crt and dir/<file>.key (the key 0600)
// and returns their paths. The files are replaced atomically (rename), so a
// process watching them never reads half a certificate.
func (ca *CA) IssueFiles(dir, file string, l Leaf) (certPath, keyPath string, err error) {
	c, k, err := ca.Issue(l)
	if err != nil {
		return "", "", err
	}
	certPath, keyPath = filepath.Join(dir, file+".crt"), filepath.Join(dir, file+".key")
	if err := writeAtomic(keyPath, k, 0o600); err != nil {
		return "", "", err
	}
	if err := writeAtomic(certPath, c, 0o644); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

// WriteSigningKey writes a fresh Ed25519 private key to path as PEM PKCS #8
// (0600): the turn-grant key catalog-svc's --grant-key reads (ADR 0015).
func WriteSigningKey(path string) error {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeAtomic(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

func writeAtomic(path string, b []byte, mode os.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("pki: serial: %v", err))
	}
	return n
}
