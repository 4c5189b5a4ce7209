// Package web holds berth's server-rendered pages: html/template files
// and static assets (one style sheet, a little plain JavaScript) embedded
// into the binary, and the data each page needs. Handlers in other
// packages (the OAuth login, consent and authorized-apps pages of
// internal/oauth, the console of internal/console) fill the data and call
// Render or RenderPage; this package owns the markup and the headers that
// keep the pages safe (no framing, no caching, no referrer, a content
// security policy that allows no inline script or style).
package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"time"
)

//go:embed templates/*.html
var files embed.FS

//go:embed static
var static embed.FS

// Pages renders the embedded templates.
type Pages struct {
	t *template.Template
}

// New parses the embedded templates.
func New() (*Pages, error) {
	t, err := template.New("").Funcs(template.FuncMap{
		"date": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"ago":  func(t time.Time) string { return Ago(time.Now(), t) },
	}).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("parse page templates: %w", err)
	}
	return &Pages{t: t}, nil
}

// Page names.
const (
	PageLogin   = "login.html"
	PageConsent = "consent.html"
	PageError   = "error.html"
	PageApps    = "apps.html"
)

// Render writes page with data and status. The page is rendered to memory
// first, so a template error becomes a clean 500 instead of half a page.
func (p *Pages) Render(w http.ResponseWriter, status int, page string, data any) error {
	var buf bytes.Buffer
	if err := p.t.ExecuteTemplate(&buf, page, data); err != nil {
		http.Error(w, "internal error rendering page", http.StatusInternalServerError)
		return fmt.Errorf("render %s: %w", page, err)
	}
	// No script at all; form-action is left open because the consent
	// form's answer redirects to the client's redirect URI.
	return write(w, status, buf.Bytes(), "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'")
}

// write sends a rendered page with the headers every page needs and csp.
func write(w http.ResponseWriter, status int, page []byte, csp string) error {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", csp)
	w.WriteHeader(status)
	_, err := w.Write(page)
	return err
}

// Login is the data of the login page.
type Login struct {
	// DevLogin shows the username form of the development login.
	DevLogin bool
	// UpstreamURL, when set, shows a "Sign in with UpstreamName" button.
	UpstreamURL  string
	UpstreamName string
	// Request is the pending login's handle; CSRF the form's token.
	Request string
	CSRF    string
	// Username is the value to show again after an error.
	Username string
	Error    string
}

// Scope is one requested scope with what it allows, in words.
type Scope struct {
	Name        string
	Description string
}

// Consent is the data of the consent page.
type Consent struct {
	Username     string
	ClientName   string
	ClientID     string
	RedirectHost string
	// FromDocument: the client is identified by a metadata document URL
	// (ClientID) rather than registered here.
	FromDocument bool
	Scopes       []Scope
	// Withheld are requested scopes the user's roles cannot use; they
	// are left out of the grant and the page says so.
	Withheld []string
	// Query is the authorization request, posted back with the answer.
	Query string
	CSRF  string
}

// Error is the data of the error page.
type Error struct {
	Title       string
	Code        string
	Description string
}

// App is one application a user authorized.
type App struct {
	ClientID   string
	ClientName string
	Scopes     []string
	Since      time.Time
}

// Apps is the data of the authorized apps page.
type Apps struct {
	Username string
	Apps     []App
	CSRF     string
	// Notice confirms the last action, e.g. a revocation.
	Notice string
}
