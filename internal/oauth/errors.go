package oauth

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// OAuth error codes (RFC 6749 5.2 and 4.1.2.1, RFC 7591 3.2.2, RFC 8707,
// RFC 7009).
const (
	errInvalidRequest          = "invalid_request"
	errInvalidClient           = "invalid_client"
	errInvalidGrant            = "invalid_grant"
	errUnauthorizedClient      = "unauthorized_client"
	errUnsupportedGrantType    = "unsupported_grant_type"
	errUnsupportedResponseType = "unsupported_response_type"
	errInvalidScope            = "invalid_scope"
	errInvalidTarget           = "invalid_target"
	errAccessDenied            = "access_denied"
	errLoginRequired           = "login_required"
	errConsentRequired         = "consent_required"
	errServerError             = "server_error"
	errInvalidRedirectURI      = "invalid_redirect_uri"
	errInvalidClientMetadata   = "invalid_client_metadata"
	errInvalidToken            = "invalid_token"
	errTemporarilyUnavailable  = "temporarily_unavailable"
)

// oauthError is an error answered in OAuth's own format.
type oauthError struct {
	Code        string
	Description string
	// Status is the HTTP status of a direct answer; 0 means 400.
	Status int
	// RetryAfter, when set, is sent as the Retry-After header (with a
	// 429 or 503 status).
	RetryAfter time.Duration
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func oerr(code, format string, args ...any) *oauthError {
	return &oauthError{Code: code, Description: fmt.Sprintf(format, args...)}
}

func (e *oauthError) status() int {
	if e.Status == 0 {
		return http.StatusBadRequest
	}
	return e.Status
}

// setRetryAfter sets the Retry-After header of an answer to e.
func (e *oauthError) setRetryAfter(w http.ResponseWriter) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retrySeconds(e.RetryAfter)))
	}
}

// tooMany is the answer to a request over a rate limit.
func tooMany(code string, wait time.Duration, format string, args ...any) *oauthError {
	return &oauthError{Code: code, Status: http.StatusTooManyRequests, RetryAfter: wait,
		Description: fmt.Sprintf(format, args...)}
}

// unavailable is the answer when the database cannot be reached: the
// request may well succeed in a few seconds.
func unavailable() *oauthError {
	return &oauthError{Code: errTemporarilyUnavailable, Status: http.StatusServiceUnavailable,
		RetryAfter: wire.RetryAfterUnavailable, Description: store.UnavailableMessage}
}

// errorBody is the JSON error answer of RFC 6749 5.2.
type errorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

// writeJSON answers v with the no-store headers every token and
// registration answer needs (RFC 6749 5.1).
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(status)
	// The status is already sent; a failed write means the client left.
	_ = jsonEncoder(w).Encode(v)
}

func writeOAuthError(w http.ResponseWriter, e *oauthError) {
	e.setRetryAfter(w)
	writeJSON(w, e.status(), errorBody{Error: e.Code, Description: e.Description})
}

// jsonEncoder writes JSON without HTML escaping: the documents hold URLs
// whose '&' should stay readable.
func jsonEncoder(w http.ResponseWriter) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}
