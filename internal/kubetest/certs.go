package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the files one control plane's TLS and token signing use, all
// made fresh for it: nothing is shared between control planes.
type pki struct {
	CA        string // CA certificate: it signed every certificate below
	ServeCert string // serving certificate of every loopback server (127.0.0.1, kubernetes.default.svc)
	ServeKey  string
	// KubeletClientCert is the client certificate kube-apiserver shows the
	// kubelet (for pods/log); the kubelet trusts CA's clients.
	KubeletClientCert string
	KubeletClientKey  string
	SAKey             string // ServiceAccount token signing key (private)
	SAPub             string // its public half, for verifying
	caPEM             []byte
	// The CA itself, to issue a real node's kubelet its client
	// certificate once the node's name is known.
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

// newPKI writes a CA, certificates and a token signing key into dir.
func newPKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubetest-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("sign CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	p := &pki{
		CA:                filepath.Join(dir, "ca.crt"),
		ServeCert:         filepath.Join(dir, "serving.crt"),
		ServeKey:          filepath.Join(dir, "serving.key"),
		KubeletClientCert: filepath.Join(dir, "kubelet-client.crt"),
		KubeletClientKey:  filepath.Join(dir, "kubelet-client.key"),
		SAKey:             filepath.Join(dir, "sa.key"),
		SAPub:             filepath.Join(dir, "sa.pub"),
		caPEM:             pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		caCert:            caCert,
		caKey:             caKey,
	}
	if err := os.WriteFile(p.CA, p.caPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write CA: %w", err)
	}
	serving := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kubetest-loopback"},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.ParseIP(serviceIP)},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := issue(caCert, caKey, serving, p.ServeCert, p.ServeKey); err != nil {
		return nil, err
	}
	// system:masters so the kubelet, which checks only that CA signed the
	// certificate, could also authorize by group as a real one does.
	client := &x509.Certificate{
		SerialNumber: big.NewInt(3),
		Subject:      pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := issue(caCert, caKey, client, p.KubeletClientCert, p.KubeletClientKey); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ServiceAccount key: %w", err)
	}
	if err := writeKey(p.SAKey, saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("encode ServiceAccount public key: %w", err)
	}
	if err := os.WriteFile(p.SAPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return nil, fmt.Errorf("write ServiceAccount public key: %w", err)
	}
	return p, nil
}

// nodeClient writes a client certificate and key for the kubelet of the
// Node name: user system:node:<name> in group system:nodes, the identity
// the Node authorizer and the NodeRestriction admission plugin grant a
// kubelet's rights to, as on a cluster.
func (p *pki) nodeClient(name, certPath, keyPath string) error {
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return fmt.Errorf("serial for node %s: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return issue(p.caCert, p.caKey, tmpl, certPath, keyPath)
}

// nodeServing writes the serving certificate of a real node's kubelet,
// for its address ip: kube-apiserver checks it against the CA
// (--kubelet-certificate-authority) when it fetches logs.
func (p *pki) nodeServing(name string, ip net.IP, certPath, keyPath string) error {
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return fmt.Errorf("serial for node %s: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  []net.IP{ip},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return issue(p.caCert, p.caKey, tmpl, certPath, keyPath)
}

// issue signs tmpl with the CA and writes the certificate and a new key.
func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key for %s: %w", tmpl.Subject.CommonName, err)
	}
	tmpl.NotBefore = ca.NotBefore
	tmpl.NotAfter = ca.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("sign %s: %w", tmpl.Subject.CommonName, err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", certPath, err)
	}
	return writeKey(keyPath, key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode key %s: %w", path, err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write key %s: %w", path, err)
	}
	return nil
}
