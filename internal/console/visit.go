package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/websession"
	"github.com/berth-mcp/berth/internal/wire"
	"github.com/berth-mcp/berth/web"
)

// Visit is the browser behind one request: signed in (Session and
// Principal set) or not (both zero).
type Visit struct {
	Session *websession.Session
	// Principal is what the user may do: their role bindings with every
	// scope those allow (Identity.BrowserPrincipal). Pages pass it to the
	// service and never decide on their own.
	Principal rbac.Principal
}

// SignedIn reports whether the browser is signed in.
func (v *Visit) SignedIn() bool { return v.Session != nil }

// pageFunc handles one console request for the browser v.
type pageFunc func(w http.ResponseWriter, r *http.Request, v *Visit)

// visit resolves the browser's session (if any) and calls fn: for pages
// anyone may see.
func (c *Console) visit(fn pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, err := c.lookup(r)
		if err != nil {
			c.fail(w, r, &Visit{}, err)
			return
		}
		fn(w, r, v)
	}
}

// signedIn is visit for pages only a signed-in browser may see; others
// are sent to sign in and come back here.
func (c *Console) signedIn(fn pageFunc) http.HandlerFunc {
	return c.visit(func(w http.ResponseWriter, r *http.Request, v *Visit) {
		if !v.SignedIn() {
			c.signIn(w, r, v)
			return
		}
		fn(w, r, v)
	})
}

// maxFormBytes bounds every form the console reads (a command, a file
// path; nothing large is posted).
const maxFormBytes = 256 << 10

// form is signedIn for a posted form: it must come from a page of this
// site (same-origin check), be urlencoded and bounded, and carry the
// session's CSRF token for the path it posts to (Page.CSRF). Only then
// does fn run, with r.PostForm parsed.
func (c *Console) form(fn pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := &Visit{}
		if c.opts.Sessions == nil {
			c.signIn(w, r, v)
			return
		}
		if err := c.opts.Sessions.CheckOrigin(r); err != nil {
			c.errorPage(w, r, v, http.StatusForbidden, "Form refused", "forbidden",
				"The form was posted from another site; berth accepts its forms only from its own pages.")
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/x-www-form-urlencoded") {
			c.errorPage(w, r, v, http.StatusBadRequest, "Form refused", wire.CodeBadRequest, "The form must be sent as application/x-www-form-urlencoded.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			c.errorPage(w, r, v, http.StatusBadRequest, "Form refused", wire.CodeBadRequest, "The form is malformed or too large.")
			return
		}
		v, err := c.lookup(r)
		if err != nil {
			c.fail(w, r, v, err)
			return
		}
		if !v.SignedIn() {
			c.errorPage(w, r, v, http.StatusUnauthorized, "Signed out", wire.CodeUnauthorized,
				"Your sign-in expired, so the form was not sent. Sign in and try again.")
			return
		}
		if err := c.opts.Sessions.CheckCSRF(v.Session, r.PostForm.Get("csrf"), csrfPurpose, r.URL.Path); err != nil {
			msg := "The form was not sent by this site for this browser (CSRF check failed). Reload the page and try again."
			if errors.Is(err, websession.ErrCSRFExpired) {
				msg = "The form expired (CSRF check failed). Reload the page and try again."
			}
			c.errorPage(w, r, v, http.StatusForbidden, "Form refused", "forbidden", msg)
			return
		}
		fn(w, r, v)
	}
}

// csrfPurpose is the CSRF purpose of every console form; each token is
// bound to the path its form posts to, so a token of one form (stop this
// server) never passes for another (stop that one).
const csrfPurpose = "console"

// lookup finds the browser's session and principal. A session whose user
// can no longer sign in counts as none.
func (c *Console) lookup(r *http.Request) (*Visit, error) {
	if c.opts.Sessions == nil {
		return &Visit{}, nil
	}
	s, err := c.opts.Sessions.Get(r)
	if err != nil || s == nil {
		return &Visit{}, err
	}
	p, err := c.svc.BrowserPrincipal(r.Context(), s.UserID)
	if err != nil {
		if wire.DetailOf(err).Code == wire.CodeUnauthorized {
			return &Visit{}, nil
		}
		return &Visit{}, err
	}
	return &Visit{Session: s, Principal: p}, nil
}

// signInURL is the sign-in button's link, coming back to returnTo; ""
// when this berth has no browser sign-in.
func (c *Console) signInURL(returnTo string) string {
	if c.opts.Sessions == nil {
		return ""
	}
	return "/oauth/login/start?return_to=" + url.QueryEscape(returnTo)
}

// signIn sends a signed-out browser to sign in and come back to the page
// it asked for.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request, v *Visit) {
	if c.opts.Sessions == nil {
		c.errorPage(w, r, v, http.StatusUnauthorized, "Sign-in is not available", wire.CodeUnauthorized,
			"This berth has no browser sign-in (no identity provider is configured, and the development login is for loopback only).")
		return
	}
	http.Redirect(w, r, c.signInURL(r.URL.RequestURI()), http.StatusSeeOther)
}

// nav is the navigation bar for v on the section active.
func (c *Console) nav(v *Visit, active string) web.Nav {
	n := web.Nav{Active: active, SignIn: c.signInURL("/")}
	if v.SignedIn() {
		n.Username = v.Principal.Username
		n.Admin = v.Principal.IsAdmin("")
		n.SignOutCSRF = c.opts.Sessions.CSRF(v.Session, c.opts.SignOutPurpose)
	}
	return n
}

// render writes the page name, titled title, in section active, with the
// page's data.
func (c *Console) render(w http.ResponseWriter, r *http.Request, v *Visit, status int, name, active, title string, data any) {
	var csrf func(string) string
	if v.SignedIn() {
		csrf = func(action string) string { return c.opts.Sessions.CSRF(v.Session, csrfPurpose, action) }
	}
	if err := c.pages.RenderPage(w, status, name, web.NewPage(title, c.nav(v, active), data, csrf)); err != nil {
		c.log.Error("render console page", "page", name, "path", r.URL.Path, "err", err)
	}
}

// errorPage shows an error in the console's layout.
func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, v *Visit, status int, title, code, description string) {
	c.render(w, r, v, status, web.PageConsoleError, "", title, web.Error{Title: title, Code: code, Description: description})
}

// fail shows what went wrong with a call to the service, in the page:
// the service's message for what the user can act on (a bad input, a
// missing or forbidden resource, a quota), a plain sentence otherwise
// (the details go to the log, never a stack trace or JSON to the page).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v *Visit, err error) {
	if errors.Is(store.Classify(err), store.ErrUnavailable) {
		c.log.Error("console: database unavailable", "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "2")
		c.errorPage(w, r, v, http.StatusServiceUnavailable, "Try again shortly", wire.CodeUnavailable,
			"berth cannot reach its database right now. Try again in a few seconds.")
		return
	}
	d := wire.DetailOf(err)
	status := wire.StatusOf(d.Code)
	switch d.Code {
	case wire.CodeNotFound:
		c.errorPage(w, r, v, status, "Not found", d.Code, d.Message)
	case wire.CodeForbidden:
		c.errorPage(w, r, v, status, "Not allowed", d.Code, d.Message)
	case wire.CodeInternal:
		c.log.Error("console page failed", "method", r.Method, "path", r.URL.Path, "err", err)
		c.errorPage(w, r, v, status, "Something went wrong", d.Code, "Something went wrong on the server. Try again later.")
	default:
		if status >= 500 {
			c.log.Warn("console page failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		c.errorPage(w, r, v, status, "That did not work", d.Code, d.Message)
	}
}

// notFound is every path the console does not have.
func (c *Console) notFound(w http.ResponseWriter, r *http.Request, v *Visit) {
	c.errorPage(w, r, v, http.StatusNotFound, "Not found", wire.CodeNotFound, "There is no page at "+r.URL.Path+".")
}
