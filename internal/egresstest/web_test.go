//go:build linux

package egresstest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// Every web host answers /hello over HTTP and HTTPS, by name (the test
// DNS) and on its IPv6 address; the certificate is the test CA's.
func TestWebHostsAnswer(t *testing.T) {
	inet := Start(t)
	c := inet.HTTPClient()
	defer c.CloseIdleConnections()
	for _, host := range []string{"files.test", "tls.test", "pypi.test", "git.test", "npm.test", "x.wild.test"} {
		for _, scheme := range []string{"http", "https"} {
			if body := fetch(t, c, scheme+"://"+host+"/hello"); body != Hello {
				t.Errorf("%s://%s/hello: %q", scheme, host, body)
			}
		}
	}
	for _, scheme := range []string{"http", "https"} {
		u := fmt.Sprintf("%s://[%s]/hello", scheme, inet.Addr6("tls.test"))
		if body := fetch(t, c, u); body != Hello {
			t.Errorf("%s: %q", u, body)
		}
	}
	if n := inet.Requests("tls.test"); n != 4 {
		t.Errorf("tls.test counted %d requests, want 4", n)
	}
}

// HTTPS is trusted through the test CA and nothing else: a client with
// the system's CAs alone refuses it, one with CABundle (the system's and
// the test CA) accepts it.
func TestHTTPSNeedsTheTestCA(t *testing.T) {
	inet := Start(t)
	sys, err := x509.SystemCertPool()
	if err != nil {
		t.Fatal(err)
	}
	bundle := x509.NewCertPool()
	if !bundle.AppendCertsFromPEM(inet.CABundle) {
		t.Fatal("CABundle has no certificate")
	}
	fromFile, err := os.ReadFile(inet.CABundleFile)
	if err != nil || string(fromFile) != string(inet.CABundle) {
		t.Fatalf("CABundleFile does not hold CABundle: %v", err)
	}
	ca, err := os.ReadFile(inet.CAFile)
	if err != nil || !strings.Contains(string(inet.CABundle), string(ca)) {
		t.Fatalf("CABundle lacks CAFile: %v", err)
	}
	for _, tc := range []struct {
		pool *x509.CertPool
		ok   bool
	}{{sys, false}, {bundle, true}} {
		c := inet.HTTPClient()
		c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: tc.pool}
		resp, err := c.Get("https://tls.test/hello")
		if err == nil {
			resp.Body.Close()
		}
		var unknown x509.UnknownAuthorityError
		if tc.ok && err != nil {
			t.Errorf("with the bundle: %v", err)
		}
		if !tc.ok && !errors.As(err, &unknown) {
			t.Errorf("with the system's CAs alone: %v, want an unknown authority", err)
		}
		c.CloseIdleConnections()
	}
}

// /bytes/N streams exactly N bytes of the pattern.
func TestBytes(t *testing.T) {
	inet := Start(t)
	c := inet.HTTPClient()
	defer c.CloseIdleConnections()
	for _, n := range []int64{0, 1, 251 * 128, 5 << 20} {
		resp, err := c.Get(fmt.Sprintf("https://files.test/bytes/%d", n))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadPattern(resp.Body)
		resp.Body.Close()
		if err != nil || got != n || resp.ContentLength != n {
			t.Errorf("/bytes/%d: read %d (length %d): %v", n, got, resp.ContentLength, err)
		}
	}
	for _, bad := range []string{"-1", "x", "1073741825"} {
		resp, err := c.Get("http://files.test/bytes/" + bad)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("/bytes/%s: %s", bad, resp.Status)
		}
	}
}

// A client that stops reading a large download does not hold up the end
// of the test, nor keep the namespace alive.
func TestAbandonedDownload(t *testing.T) {
	var inet *Internet
	var resp *http.Response
	t.Run("use", func(t *testing.T) {
		inet = Start(t)
		c := inet.HTTPClient()
		var err error
		resp, err = c.Get("http://files.test/bytes/1073741824")
		if err != nil {
			t.Fatal(err)
		}
		// Read a little, then leave the body open past the test's end.
		if _, err := io.ReadFull(resp.Body, make([]byte, 1<<20)); err != nil {
			t.Fatal(err)
		}
	})
	if resp != nil {
		defer resp.Body.Close()
	}
	if inet.lingered {
		t.Error("the namespace outlived its removal")
	}
}

func fetch(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
	}
	return string(body)
}

// How fast the host downloads 100 MB from files.test over HTTP: the
// ceiling for a gateway benchmark that relays the same download.
func BenchmarkDownload100MB(b *testing.B) {
	inet := Start(b)
	c := inet.HTTPClient()
	defer c.CloseIdleConnections()
	const n = 100 << 20
	b.SetBytes(n)
	for b.Loop() {
		resp, err := c.Get(fmt.Sprintf("http://files.test/bytes/%d", n))
		if err != nil {
			b.Fatal(err)
		}
		got, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || got != n {
			b.Fatalf("read %d: %v", got, err)
		}
	}
}
