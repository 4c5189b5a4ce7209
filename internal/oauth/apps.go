package oauth

import (
	"context"
	"net/http"

	"github.com/berth-mcp/berth/web"
)

// appsPage is GET /account/apps: the applications the user authorized.
func (s *Server) appsPage(w http.ResponseWriter, r *http.Request) {
	b, err := s.sessions.Get(r)
	if err != nil {
		s.pageFail(w, r, err)
		return
	}
	if b == nil {
		s.loginRedirect(w, r, "/account/apps")
		return
	}
	apps, err := s.listConsents(r.Context(), b.UserID)
	if err != nil {
		s.pageFail(w, r, err)
		return
	}
	notice := ""
	if r.URL.Query().Get("revoked") != "" {
		notice = "Access revoked. The application's tokens no longer work."
	}
	csrf := s.sessions.CSRF(b, csrfAccount)
	// The page is part of the console: its navigation shows the admin
	// section to global admins.
	p, err := s.opts.Users.PrincipalForUser(r.Context(), b.UserID, nil, "")
	if err != nil {
		s.pageFail(w, r, err)
		return
	}
	nav := web.Nav{Active: "apps", Username: b.Username, Admin: p.IsAdmin(""), SignOutCSRF: csrf}
	page := web.NewPage("Authorized apps", nav, web.Apps{Username: b.Username, Apps: apps, CSRF: csrf, Notice: notice}, nil)
	if err := s.pages.RenderPage(w, http.StatusOK, web.PageApps, page); err != nil {
		s.log.Error("render page", "path", r.URL.Path, "err", err)
	}
}

// revokeApp is POST /account/apps/revoke: forget the consent and revoke
// every token the client holds for the user.
func (s *Server) revokeApp(w http.ResponseWriter, r *http.Request) {
	b := s.signedInForm(w, r, "Your sign-in expired; open the authorized apps page again.", "The form", csrfAccount)
	if b == nil {
		return
	}
	clientID := r.PostForm.Get("client_id")
	if clientID == "" {
		s.renderError(w, http.StatusBadRequest, errInvalidRequest, "client_id is missing.")
		return
	}
	if err := s.revokeConsent(r.Context(), b.UserID, clientID); err != nil {
		s.pageFail(w, r, err)
		return
	}
	s.audit(r.Context(), b.UserID, b.Username, "oauth.consent.revoke", clientID, "ok", nil)
	http.Redirect(w, r, "/account/apps?revoked=1", http.StatusSeeOther)
}

func (s *Server) listConsents(ctx context.Context, userID string) ([]web.App, error) {
	consents, err := s.opts.Store.ListConsents(ctx, userID)
	if err != nil {
		return nil, err
	}
	apps := make([]web.App, len(consents))
	for i, c := range consents {
		apps[i] = web.App{ClientID: c.ClientID, ClientName: c.ClientName, Scopes: c.Scopes, Since: c.CreatedAt}
		if apps[i].ClientName == "" {
			apps[i].ClientName = c.ClientID
		}
	}
	return apps, nil
}

// revokeConsent deletes the user's consent for the client and revokes
// every grant the client holds for the user.
func (s *Server) revokeConsent(ctx context.Context, userID, clientID string) error {
	defer s.forgetCredentials()
	return s.opts.Store.RevokeConsent(ctx, userID, clientID)
}
