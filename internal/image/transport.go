package image

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// httpsOnly refuses every plain-HTTP request except to the registries the
// operator listed. go-containerregistry on its own falls back to plain
// HTTP for loopback and private-range addresses, which would send a
// namespace's credentials, and take layers, unauthenticated on the wire;
// berth leaves that to an explicit list. It also guards redirects (a
// registry sending blobs to a plain-HTTP store).
type httpsOnly struct {
	next      http.RoundTripper
	plainHTTP []string
}

func (t *httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !slices.Contains(t.plainHTTP, strings.ToLower(req.URL.Host)) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("registry %s over plain HTTP: not allowed (berth speaks HTTPS to registries the operator has not listed as plain HTTP)", req.URL.Host)
	}
	return t.next.RoundTrip(req)
}
