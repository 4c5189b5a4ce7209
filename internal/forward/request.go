package forward

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/berth-mcp/berth/internal/wire"
)

// Methods are the methods forwarded into a sandbox, by the streamed
// forward and forward_request alike. CONNECT and TRACE are left out on
// purpose: a reverse proxy has no use for the one, and the other would
// echo the caller's headers back.
var Methods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}

// CheckMethod refuses a method berth does not forward, naming the field.
func CheckMethod(method string) error {
	if !slices.Contains(Methods, method) {
		return wire.Errorf(wire.CodeBadRequest, "method: want one of %s, got %q", strings.Join(Methods, ", "), method)
	}
	return nil
}

// CheckHeaders refuses request headers given as data (forward_request's
// headers): names that are not HTTP tokens, values with line breaks or
// other control characters (which would otherwise fail in the transport,
// after the caller's mistake had become a gateway error), and the headers
// the streamed forward strips: hop-by-hop ones, which describe one
// connection, and the caller's credentials and forwarding claims, which
// only berth may make (see PrepareHeader). Refusing them says so, where
// dropping them would leave the caller guessing.
func CheckHeaders(h map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(h)) {
		v := h[k]
		if !httpguts.ValidHeaderFieldName(k) {
			return wire.Errorf(wire.CodeBadRequest, "headers: want header names of HTTP token characters, got %q", k)
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return wire.Errorf(wire.CodeBadRequest, "headers[%s]: want a value without line breaks or control characters, got %q", k, v)
		}
		name := http.CanonicalHeaderKey(k)
		switch {
		case slices.Contains(hopByHopHeaders, name):
			return wire.Errorf(wire.CodeBadRequest, "headers[%s]: a hop-by-hop header, which berth never forwards", k)
		case slices.Contains(callerOnlyHeaders, name) || strings.HasPrefix(name, "X-Forwarded-"):
			return wire.Errorf(wire.CodeBadRequest, "headers[%s]: a credential or forwarding header, which only berth sets on requests to a sandbox", k)
		}
	}
	return nil
}
