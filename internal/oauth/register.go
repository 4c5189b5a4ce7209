package oauth

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/store"
)

// maxRegistrationBytes bounds a registration document.
const maxRegistrationBytes = 16 << 10

// readMetadata decodes a client metadata document from a registration
// request body.
func readMetadata(w http.ResponseWriter, r *http.Request) (clientMetadata, *oauthError) {
	var m clientMetadata
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return m, oerr(errInvalidClientMetadata, "the registration request must be application/json, got %q", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRegistrationBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return m, &oauthError{Code: errInvalidClientMetadata, Status: http.StatusRequestEntityTooLarge,
				Description: fmt.Sprintf("the registration document is larger than %d bytes", maxRegistrationBytes)}
		}
		return m, oerr(errInvalidClientMetadata, "read the registration document: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&m); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return m, oerr(errInvalidClientMetadata, "field %s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return m, oerr(errInvalidClientMetadata, "the registration document is not a JSON object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return m, oerr(errInvalidClientMetadata, "the registration document has data after the JSON object")
	}
	return m, nil
}

// register is POST /oauth/register (RFC 7591).
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	m, oe := readMetadata(w, r)
	if oe != nil {
		writeOAuthError(w, oe)
		return
	}
	// The server picks client identifiers; a client cannot claim one.
	m.ClientID = ""
	if oe := m.normalize(false); oe != nil {
		writeOAuthError(w, oe)
		return
	}
	// Charged only now: a client fixing its metadata by trial and error
	// stores nothing, and should see what is wrong rather than a 429.
	addr, now := clientAddr(r, s.opts.TrustedProxies), s.now()
	if wait := spend(now, s.regLimit.get(addr, now)); wait > 0 {
		s.log.Debug("oauth registration rate limited", "client_addr", addr.String())
		writeOAuthError(w, tooMany(errInvalidRequest, wait,
			"too many registrations from this address; retry after %d seconds", retrySeconds(wait)))
		return
	}
	id, err := newClientID()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	regToken, regHash, err := newSecret(regTokenPrefix)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c := &client{ID: id, Meta: m}
	var secret string
	if m.TokenEndpointAuthMethod != authNone {
		secret, c.SecretHash, err = newSecret(clientSecretPrefix)
		if err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if err := s.insertClient(r.Context(), c, regHash); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("oauth client registered", "client_id", id, "client_name", m.ClientName, "auth_method", m.TokenEndpointAuthMethod)
	s.audit(r.Context(), "", "", "oauth.client.register", id, "ok",
		map[string]any{"client_name": m.ClientName, "redirect_uris": m.RedirectURIs, "auth_method": m.TokenEndpointAuthMethod})
	writeJSON(w, http.StatusCreated, s.registrationResponse(c, secret, regToken, s.now()))
}

// registrationResponse is the client information response of RFC 7591
// 3.2.1 and RFC 7592 3: the metadata with the identifiers and, once, the
// secrets.
func (s *Server) registrationResponse(c *client, secret, regToken string, issuedAt time.Time) map[string]any {
	out := map[string]any{}
	b, _ := json.Marshal(c.Meta)
	_ = json.Unmarshal(b, &out)
	out["client_id"] = c.ID
	out["client_id_issued_at"] = issuedAt.Unix()
	out["registration_client_uri"] = s.issuer + "/oauth/register/" + c.ID
	if secret != "" {
		out["client_secret"] = secret
	}
	if c.Meta.TokenEndpointAuthMethod != authNone {
		out["client_secret_expires_at"] = 0
	}
	if regToken != "" {
		out["registration_access_token"] = regToken
	}
	return out
}

// manageRegistration is RFC 7592: read, update or delete a registration
// with its registration access token.
func (s *Server) manageRegistration(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPut && r.Method != http.MethodDelete {
		w.Header().Set("Allow", "GET, PUT, DELETE")
		writeOAuthError(w, &oauthError{Code: errInvalidRequest, Status: http.StatusMethodNotAllowed,
			Description: r.Method + " is not allowed here; use GET, PUT or DELETE"})
		return
	}
	id := r.PathValue("client_id")
	rc, oe, err := s.registrationAccess(r, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if oe != nil {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="berth", error=%q, error_description=%q`, oe.Code, oe.Description))
		writeOAuthError(w, oe)
		return
	}
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, s.registrationResponse(&rc.client, "", "", rc.IssuedAt))
	case http.MethodDelete:
		if err := s.deleteClient(r.Context(), id); err != nil {
			s.fail(w, r, err)
			return
		}
		s.audit(r.Context(), "", "", "oauth.client.delete", id, "ok", nil)
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPut:
		m, oe := readMetadata(w, r)
		if oe != nil {
			writeOAuthError(w, oe)
			return
		}
		if m.ClientID != id {
			writeOAuthError(w, oerr(errInvalidClientMetadata, "client_id in the document must be %q", id))
			return
		}
		if m.ClientSecret != "" && (rc.SecretHash == nil || subtle.ConstantTimeCompare(hashSecret(m.ClientSecret), rc.SecretHash) != 1) {
			writeOAuthError(w, oerr(errInvalidClientMetadata, "client_secret does not match the registered secret"))
			return
		}
		m.ClientID = ""
		if m.TokenEndpointAuthMethod == "" {
			m.TokenEndpointAuthMethod = rc.Meta.TokenEndpointAuthMethod
		}
		if oe := m.normalize(false); oe != nil {
			writeOAuthError(w, oe)
			return
		}
		if (m.TokenEndpointAuthMethod == authNone) != (rc.Meta.TokenEndpointAuthMethod == authNone) {
			writeOAuthError(w, oerr(errInvalidClientMetadata,
				"token_endpoint_auth_method cannot change between a public (none) and a confidential method; register a new client"))
			return
		}
		rc.Meta = m
		if err := s.updateClient(r.Context(), &rc.client); err != nil {
			s.fail(w, r, err)
			return
		}
		s.audit(r.Context(), "", "", "oauth.client.update", id, "ok", map[string]any{"redirect_uris": m.RedirectURIs})
		writeJSON(w, http.StatusOK, s.registrationResponse(&rc.client, "", "", rc.IssuedAt))
	}
}

// registrationAccess checks the registration access token of a request
// on client id. An unknown client and a wrong token get the same answer.
func (s *Server) registrationAccess(r *http.Request, id string) (*registeredClient, *oauthError, error) {
	unauthorized := &oauthError{Code: errInvalidToken, Status: http.StatusUnauthorized,
		Description: "the registration access token is missing or not valid for this client"}
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || !hasShape(strings.TrimSpace(tok), regTokenPrefix) {
		return nil, unauthorized, nil
	}
	rc, err := s.registeredClientByID(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, unauthorized, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if subtle.ConstantTimeCompare(hashSecret(strings.TrimSpace(tok)), rc.RegTokenHash) != 1 {
		return nil, unauthorized, nil
	}
	return rc, nil, nil
}
