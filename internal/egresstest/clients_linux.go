package egresstest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"time"
)

// CertPool returns a pool with the test CA alone.
func (i *Internet) CertPool() *x509.CertPool { return i.ca.pool.Clone() }

// HTTPClient returns a client for tests in the host's namespace: it
// resolves names with the internet's DNS and trusts the test CA (alone).
// Close its idle connections when done (CloseIdleConnections).
func (i *Internet) HTTPClient() *http.Client {
	d := &net.Dialer{Resolver: i.Resolver(), Timeout: 10 * time.Second}
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			TLSClientConfig:     &tls.Config{RootCAs: i.CertPool()},
			ForceAttemptHTTP2:   true,
			TLSHandshakeTimeout: 10 * time.Second,
		},
	}
}
