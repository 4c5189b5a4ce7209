package oidclogin

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
)

// opOptions bend a real in-process OpenID provider (mockoidc) to produce
// the bad answers a login must refuse. All are fixed before it starts.
type opOptions struct {
	// rewrite changes the ID token's claims in the token response; the
	// token is then signed again with the provider's own key.
	rewrite func(claims map[string]any)
	// signWith re-signs the ID token with a key that is not in the
	// provider's JWKS (same kid).
	signWith *rsa.PrivateKey
	// tamper changes the payload but keeps the original signature.
	tamper bool
	// authorizeError makes the authorization endpoint send the browser
	// back with error=... instead of a code.
	authorizeError, authorizeErrorDesc string
	// skew shifts the provider's clock.
	skew time.Duration
}

// testOP is a running provider and what it saw.
type testOP struct {
	*mockoidc.MockOIDC
	mu        sync.Mutex
	authorize []url.Values // query of each authorization request
}

func (op *testOP) authorizeRequests() []url.Values {
	op.mu.Lock()
	defer op.mu.Unlock()
	return append([]url.Values(nil), op.authorize...)
}

func startOP(t *testing.T, o opOptions) *testOP {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatalf("new OP: %v", err)
	}
	op := &testOP{MockOIDC: m}
	m.FastForward(o.skew)
	if err := m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case mockoidc.AuthorizationEndpoint:
				op.mu.Lock()
				op.authorize = append(op.authorize, r.URL.Query())
				op.mu.Unlock()
				if o.authorizeError != "" {
					redirectError(w, r, o.authorizeError, o.authorizeErrorDesc)
					return
				}
			case mockoidc.TokenEndpoint:
				if o.rewrite != nil || o.signWith != nil || o.tamper {
					rewriteTokenResponse(t, m, o, next, w, r)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}); err != nil {
		t.Fatalf("OP middleware: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("OP listen: %v", err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatalf("start OP: %v", err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return op
}

func redirectError(w http.ResponseWriter, r *http.Request, code, desc string) {
	to, err := url.Parse(r.URL.Query().Get("redirect_uri"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := to.Query()
	q.Set("error", code)
	q.Set("error_description", desc)
	q.Set("state", r.URL.Query().Get("state"))
	to.RawQuery = q.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

func rewriteTokenResponse(t *testing.T, m *mockoidc.MockOIDC, o opOptions, next http.Handler, w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	var body map[string]any
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &body) != nil {
		copyResponse(w, rec)
		return
	}
	raw, _ := body["id_token"].(string)
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		copyResponse(w, rec)
		return
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Errorf("OP: decode ID token: %v", err)
		copyResponse(w, rec)
		return
	}
	claims := map[string]any{}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Errorf("OP: decode ID token claims: %v", err)
		copyResponse(w, rec)
		return
	}
	if o.rewrite != nil {
		o.rewrite(claims)
	}
	switch {
	case o.tamper:
		claims["sub"] = "someone-else"
		changed, _ := json.Marshal(claims)
		body["id_token"] = parts[0] + "." + base64.RawURLEncoding.EncodeToString(changed) + "." + parts[2]
	default:
		key := m.Keypair.PrivateKey
		if o.signWith != nil {
			key = o.signWith
		}
		kid, _ := m.Keypair.KeyID()
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims(claims))
		tok.Header["kid"] = kid
		signed, err := tok.SignedString(key)
		if err != nil {
			t.Errorf("OP: sign ID token: %v", err)
		}
		body["id_token"] = signed
	}
	out, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

func copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// otherKey is an RSA key the provider does not publish.
func otherKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return k
}

// claimsUser is an OP user whose ID token carries arbitrary claims.
type claimsUser struct {
	sub    string
	claims map[string]any
}

func (u claimsUser) ID() string                        { return u.sub }
func (u claimsUser) Userinfo([]string) ([]byte, error) { return json.Marshal(u.claims) }
func (u claimsUser) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(base); err != nil {
		return nil, err
	}
	out := jwt.MapClaims{}
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		return nil, err
	}
	for k, v := range u.claims {
		out[k] = v
	}
	return out, nil
}
