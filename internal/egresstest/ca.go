package egresstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"time"
)

// systemBundle is where Debian keeps the CAs the system trusts.
const systemBundle = "/etc/ssl/certs/ca-certificates.crt"

// authority is the test CA and the one certificate it signs for every
// host of an internet.
type authority struct {
	caPEM []byte
	pool  *x509.CertPool
	leaf  tls.Certificate
}

// newAuthority makes a CA and a server certificate for names and ips.
// Both are ECDSA P-256 and made to the rules strict verifiers apply
// (Python 3.13's VERIFY_X509_STRICT among them): key usages, key
// identifiers, and names only in the SANs.
func newAuthority(names []string, ips []netip.Addr) (*authority, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "berth egresstest CA", Organization: []string{"berth tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("make CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make server key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
	}
	for _, ip := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(ip.AsSlice()))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("make server certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &authority{
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pool:  pool,
		leaf:  tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
	}, nil
}

// bundle returns the system's CAs followed by the test CA; without a
// system bundle, the test CA alone.
func (a *authority) bundle() ([]byte, error) {
	sys, err := os.ReadFile(systemBundle)
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("read the system CA bundle: %w", err)
	}
	out := append([]byte{}, sys...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, a.caPEM...), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
