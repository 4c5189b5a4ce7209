package web

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/http"
	"time"
)

// Console page names. Each console template renders a Page whose Data is
// the page's own type (below, or the console's for pages that show the
// orchestrator's types).
const (
	PageHome         = "home.html"
	PageConsoleError = "console_error.html"
	PageServers      = "servers.html"
	PageServer       = "server.html"
	PageOperations   = "operations.html"
)

// Fragments of console pages that the script replaces in place.
const (
	FragmentServersLive = "servers_live"
	FragmentServerLive  = "server_live"
	FragmentCommand     = "command_output"
)

// consoleCSP is the console's content security policy: scripts and styles
// only from berth's own static files (no inline script, no
// 'unsafe-inline'), fetches and event streams only to berth, forms only
// to berth, never framed.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Page is what every console page's layout needs, around the page's own
// Data.
type Page struct {
	Title string
	Nav   Nav
	Data  any
	// csrf makes a form's CSRF token for the path the form posts to.
	csrf func(action string) string
}

// NewPage returns a page whose forms get their CSRF tokens from csrf
// (nil for a signed-out page, which has no forms).
func NewPage(title string, nav Nav, data any, csrf func(action string) string) Page {
	return Page{Title: title, Nav: nav, Data: data, csrf: csrf}
}

// CSRF is the token of a form that posts to action (a path), for
// templates: <input type="hidden" name="csrf" value="{{$.CSRF "/servers"}}">.
func (p Page) CSRF(action string) string {
	if p.csrf == nil {
		return ""
	}
	return p.csrf(action)
}

// Nav is the console's navigation bar.
type Nav struct {
	// Active names the current section: home, servers, operations,
	// tokens, apps or admin.
	Active string
	// Username is the signed-in user; "" when signed out.
	Username string
	// Admin shows the admin section.
	Admin bool
	// SignOutCSRF is the sign-out form's token.
	SignOutCSRF string
	// SignIn is where the sign-in button leads; "" when this berth has
	// no browser sign-in.
	SignIn string
}

// Home is the data of the start page.
type Home struct {
	// MCPURL is the public URL of the MCP endpoint.
	MCPURL string
}

// RenderPage writes a console page (or a fragment of one): like Render,
// with the console's content security policy.
func (p *Pages) RenderPage(w http.ResponseWriter, status int, name string, page Page) error {
	b, err := p.Fragment(name, page)
	if err != nil {
		http.Error(w, "internal error rendering page", http.StatusInternalServerError)
		return err
	}
	return write(w, status, b, consoleCSP)
}

// Fragment renders one named template of a page (a part the console's
// script swaps in without a reload, e.g. a server's live status) to
// bytes.
func (p *Pages) Fragment(name string, page Page) ([]byte, error) {
	var buf bytes.Buffer
	if err := p.t.ExecuteTemplate(&buf, name, page); err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// Static serves the embedded style sheet and scripts under /static/.
func Static() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "public, max-age=300")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		files.ServeHTTP(w, r)
	})
}

// Ago says how long before now t was, roughly, for tables.
func Ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case t.IsZero():
		return "never"
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	default:
		return fmt.Sprintf("%d days ago", int(d.Hours()/24))
	}
}
