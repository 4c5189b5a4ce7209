package oauth

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/websession"
	"github.com/berth-mcp/berth/internal/wire"
	"github.com/berth-mcp/berth/web"
)

// loginPage shows the ways to sign in for a pending login request.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	handle := r.URL.Query().Get("request")
	if !s.loginPending(w, r, handle, "link") {
		return
	}
	s.renderLogin(w, r, http.StatusOK, handle, "", "")
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, handle, username, msg string) {
	data := web.Login{DevLogin: s.opts.DevLogin, Request: handle, Username: username, Error: msg}
	if s.opts.Upstream != nil {
		data.UpstreamURL = "/oauth/login/upstream"
		data.UpstreamName = s.opts.UpstreamName
	}
	if s.opts.DevLogin {
		// Double-submit cookie: a cross-site page cannot read it, so it
		// cannot post a form that logs the victim in as someone else.
		key, err := s.sessions.FormKey(w, r, loginCookie, loginRequestTTL)
		if err != nil {
			s.pageFail(w, r, err)
			return
		}
		data.CSRF = websession.NewCSRF(key, csrfLogin, s.now().Add(loginRequestTTL), handle)
	}
	s.render(w, r, status, web.PageLogin, data)
}

// loginPending reports whether handle names a login request still
// waiting for its user. When not, it has answered the browser with a page
// that calls the handle a noun ("link", "request").
func (s *Server) loginPending(w http.ResponseWriter, r *http.Request, handle, noun string) bool {
	ok, err := s.loginRequestValid(r.Context(), handle)
	if err != nil {
		s.pageFail(w, r, err)
		return false
	}
	if !ok {
		s.renderError(w, http.StatusBadRequest, errInvalidRequest,
			"This sign-in "+noun+" is unknown or has expired. Go back to the application and start again.")
		return false
	}
	return true
}

// devLogin signs in with a username and no password.
func (s *Server) devLogin(w http.ResponseWriter, r *http.Request) {
	if !s.opts.DevLogin {
		s.renderError(w, http.StatusNotFound, "not_found", "The development login is not enabled on this server.")
		return
	}
	if !s.parsePageForm(w, r) {
		return
	}
	handle := r.PostForm.Get("request")
	if err := websession.CheckCSRF(s.sessions.FormKeyOf(r, loginCookie), r.PostForm.Get("csrf"), csrfLogin, s.now(), handle); err != nil {
		s.renderError(w, http.StatusForbidden, errAccessDenied,
			"The sign-in form expired or was not sent by this site (CSRF check failed). Go back and try again.")
		return
	}
	if !s.loginPending(w, r, handle, "request") {
		return
	}
	username := strings.TrimSpace(r.PostForm.Get("username"))
	u, _, err := s.opts.Users.EnsureUser(r.Context(), store.NewUser{Username: username})
	if err != nil {
		if d := wire.DetailOf(err); d.Code == wire.CodeBadRequest {
			s.renderLogin(w, r, http.StatusBadRequest, handle, username, d.Message)
			return
		}
		s.pageFail(w, r, err)
		return
	}
	if u.Disabled {
		s.renderLogin(w, r, http.StatusForbidden, handle, username, "This user is disabled.")
		return
	}
	s.finishLogin(w, r, u, handle, "dev")
}

// finishLogin starts the browser session and resumes the request that
// needed the login.
func (s *Server) finishLogin(w http.ResponseWriter, r *http.Request, u store.User, handle, method string) {
	returnTo, err := s.takeLoginRequest(r.Context(), handle)
	if err != nil {
		s.pageFail(w, r, err)
		return
	}
	if returnTo == "" {
		s.renderError(w, http.StatusBadRequest, errInvalidRequest,
			"This sign-in request is unknown, used or has expired. Go back to the application and start again.")
		return
	}
	// A new login replaces the browser's session (prompt=login, or a
	// switch of user): the old one must not stay usable.
	if old, err := s.sessions.Get(r); err != nil {
		s.pageFail(w, r, err)
		return
	} else if old != nil {
		if err := s.sessions.Drop(r.Context(), old); err != nil {
			s.pageFail(w, r, err)
			return
		}
	}
	b, err := s.sessions.Start(r.Context(), w, u.ID, u.Username)
	if err != nil {
		s.pageFail(w, r, err)
		return
	}
	s.sessions.SetCookie(w, loginCookie, "", -1)
	s.audit(r.Context(), u.ID, u.Username, "oauth.login", "", "ok", map[string]any{"method": method})
	http.Redirect(w, r, withFreshLogin(returnTo, b), http.StatusSeeOther)
}

// upstreamStart sends the browser to the OpenID Connect provider.
func (s *Server) upstreamStart(w http.ResponseWriter, r *http.Request) {
	if s.opts.Upstream == nil {
		s.renderError(w, http.StatusNotFound, "not_found", "No upstream identity provider is configured on this server.")
		return
	}
	handle := r.URL.Query().Get("request")
	if !s.loginPending(w, r, handle, "request") {
		return
	}
	s.opts.Upstream.Start(w, r, handle)
}

// upstreamCallback completes the OpenID Connect login: the user is created
// or updated from the verified identity, groups included.
func (s *Server) upstreamCallback(w http.ResponseWriter, r *http.Request) {
	if s.opts.Upstream == nil {
		s.renderError(w, http.StatusNotFound, "not_found", "No upstream identity provider is configured on this server.")
		return
	}
	id, handle, err := s.opts.Upstream.Finish(w, r)
	if err != nil {
		s.log.Info("upstream login failed", "err", err)
		s.renderError(w, http.StatusUnauthorized, errAccessDenied, "Sign-in at "+s.opts.UpstreamName+" failed: "+err.Error())
		return
	}
	username := id.Username
	if username == "" {
		username = id.Email
	}
	u, _, err := s.opts.Users.EnsureUser(r.Context(), store.NewUser{
		Username: username, Email: id.Email, DisplayName: id.Name, Groups: id.Groups,
	})
	if err != nil {
		if d := wire.DetailOf(err); d.Code == wire.CodeBadRequest {
			s.renderError(w, http.StatusBadRequest, errAccessDenied, "Your account cannot be used here: "+d.Message)
			return
		}
		s.pageFail(w, r, err)
		return
	}
	if u.Disabled {
		s.renderError(w, http.StatusForbidden, errAccessDenied, "Your berth user is disabled.")
		return
	}
	s.finishLogin(w, r, u, handle, "oidc")
}

// loginStart is GET /oauth/login/start?return_to=/path, the sign-in
// button of berth's own pages: it starts a login that resumes at
// return_to, a path on this site (anything else is refused, so the link
// cannot be an open redirect), or goes there at once when the browser is
// signed in already.
func (s *Server) loginStart(w http.ResponseWriter, r *http.Request) {
	returnTo := r.URL.Query().Get("return_to")
	if returnTo == "" {
		returnTo = "/"
	}
	if !websession.LocalPath(returnTo) {
		s.renderError(w, http.StatusBadRequest, errInvalidRequest, "return_to must be a path on this site, such as /servers.")
		return
	}
	b, err := s.sessions.Get(r)
	if err != nil {
		s.pageFail(w, r, err)
		return
	}
	if b != nil {
		http.Redirect(w, r, returnTo, http.StatusSeeOther)
		return
	}
	s.loginRedirect(w, r, returnTo)
}

// logout ends the browser session; with return_to (a path on this site)
// it sends the browser there, else it shows that it is signed out.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	b, ok := s.postedForm(w, r)
	if !ok {
		return
	}
	if b != nil {
		if err := s.sessions.CheckCSRF(b, r.PostForm.Get("csrf"), csrfAccount); err != nil {
			s.csrfRefused(w, err, "The form")
			return
		}
		if err := s.sessions.End(r.Context(), w, b); err != nil {
			s.pageFail(w, r, err)
			return
		}
	}
	if to := r.PostForm.Get("return_to"); websession.LocalPath(to) {
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, web.PageError, web.Error{Title: "Signed out", Description: "You are signed out of berth."})
}

// maxFormBytes bounds every form this package reads.
const maxFormBytes = 64 << 10

// parsePageForm reads a urlencoded POST body of bounded size, posted from
// a page of this site. It returns false when it has answered the browser.
func (s *Server) parsePageForm(w http.ResponseWriter, r *http.Request) bool {
	if err := s.sessions.CheckOrigin(r); err != nil {
		s.renderError(w, http.StatusForbidden, errAccessDenied, "The form was posted from another site; berth accepts its forms only from its own pages.")
		return false
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/x-www-form-urlencoded") {
		s.renderError(w, http.StatusBadRequest, errInvalidRequest, "the form must be sent as application/x-www-form-urlencoded")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		s.renderError(w, http.StatusBadRequest, errInvalidRequest, "the form is malformed or too large")
		return false
	}
	return true
}

// postedForm reads a form a browser posted and the browser's session (nil
// when it is signed out). ok is false when it has answered the browser.
func (s *Server) postedForm(w http.ResponseWriter, r *http.Request) (b *browserSession, ok bool) {
	if !s.parsePageForm(w, r) {
		return nil, false
	}
	b, err := s.sessions.Get(r)
	if err != nil {
		s.pageFail(w, r, err)
		return nil, false
	}
	return b, true
}

// signedInForm is postedForm for a form only a signed-in browser may send,
// and only from a page of this site: the form's CSRF token must be the
// session's for purpose, bound to the values of the form's fields named
// bound. It returns nil when it has answered the browser: with expired
// when the session is gone, or saying why form (e.g. "The form") was
// refused.
func (s *Server) signedInForm(w http.ResponseWriter, r *http.Request, expired, form, purpose string, bound ...string) *browserSession {
	b, ok := s.postedForm(w, r)
	if !ok {
		return nil
	}
	if b == nil {
		s.renderError(w, http.StatusUnauthorized, errAccessDenied, expired)
		return nil
	}
	binding := make([]string, len(bound))
	for i, name := range bound {
		binding[i] = r.PostForm.Get(name)
	}
	if err := s.sessions.CheckCSRF(b, r.PostForm.Get("csrf"), purpose, binding...); err != nil {
		s.csrfRefused(w, err, form)
		return nil
	}
	return b
}

// csrfRefused answers a form whose CSRF check failed with err, in words
// that say what to do.
func (s *Server) csrfRefused(w http.ResponseWriter, err error, form string) {
	msg := form + " was not sent by this site (CSRF check failed)."
	switch {
	case errors.Is(err, websession.ErrCSRFOtherBinding):
		msg = form + " belongs to another authorization request (CSRF check failed): each request must be answered on its own page. Go back to the application and start again."
	case errors.Is(err, websession.ErrCSRFExpired):
		msg = form + " expired (CSRF check failed). Reload the page or go back to the application and start again."
	}
	s.renderError(w, http.StatusForbidden, errAccessDenied, msg)
}

// render writes a page; a failure is logged (the status is already sent
// or a 500 was written).
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, data any) {
	if err := s.pages.Render(w, status, page, data); err != nil {
		s.log.Error("render page", "path", r.URL.Path, "err", err)
	}
}

func (s *Server) renderError(w http.ResponseWriter, status int, code, description string) {
	title := "Authorization failed"
	if status == http.StatusNotFound {
		title = "Not found"
	}
	if err := s.pages.Render(w, status, web.PageError, web.Error{Title: title, Code: code, Description: description}); err != nil {
		s.log.Error("render error page", "err", err)
	}
}

// pageFail logs an internal error and shows a page without its details.
func (s *Server) pageFail(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("oauth page failed", "method", r.Method, "path", r.URL.Path, "err", err)
	if errors.Is(store.Classify(err), store.ErrUnavailable) {
		e := unavailable()
		e.setRetryAfter(w)
		s.renderError(w, e.status(), e.Code, "berth cannot reach its database right now. Try again in a few seconds.")
		return
	}
	s.renderError(w, http.StatusInternalServerError, errServerError, "Something went wrong on the server. Try again later.")
}

// loginRedirect starts a login that resumes at returnTo.
func (s *Server) loginRedirect(w http.ResponseWriter, r *http.Request, returnTo string) {
	handle, err := s.newLoginRequest(r.Context(), returnTo)
	if err != nil {
		s.pageFail(w, r, err)
		return
	}
	http.Redirect(w, r, "/oauth/login?request="+url.QueryEscape(handle), http.StatusFound)
}
