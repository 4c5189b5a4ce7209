package orchestrator

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Reading the audit log. Everyone reads their own entries (berth:read);
// everyone's entries are for admins (the audit.read action: berth:admin
// and the admin role, globally or, with namespace given, in that
// namespace). Pages go newest first and continue below a cursor, an id,
// so entries written meanwhile never shift a later page.

// maxAuditField bounds a filter's text: nothing berth records is longer.
const maxAuditField = 256

// AuditQuery selects audit entries.
type AuditQuery struct {
	User         string    `json:"user,omitempty" jsonschema:"only entries of this user (username or user id); members may name only themselves. Default: every user's for admins, the caller's own for everyone else"`
	Action       string    `json:"action,omitempty" jsonschema:"only entries of this action, e.g. server.exec, server.create, token.create"`
	ResourceType string    `json:"resource_type,omitempty" jsonschema:"only entries about resources of this type: server, client, user, token, image, operation"`
	ResourceID   string    `json:"resource_id,omitempty" jsonschema:"only entries about the resource with this id"`
	Namespace    string    `json:"namespace,omitempty" jsonschema:"only entries in this namespace; an admin of the namespace may read every user's entries there"`
	Since        time.Time `json:"since,omitzero" jsonschema:"only entries at or after this time (RFC 3339)"`
	Until        time.Time `json:"until,omitzero" jsonschema:"only entries before this time (RFC 3339)"`
	Before       string    `json:"before,omitempty" jsonschema:"the next_cursor of the previous page, to read the entries older than it"`
	Limit        int       `json:"limit,omitempty" jsonschema:"entries per page, 1 to 1000 (default 100)"`
}

// NamesOthers reports whether the query asks for the entries of a user
// other than p, which takes audit.read; a query naming nobody falls back
// to p's own.
func (q AuditQuery) NamesOthers(p rbac.Principal) bool {
	return q.User != "" && q.User != p.UserID && !strings.EqualFold(q.User, p.Username)
}

// AuditEntry is one recorded call.
type AuditEntry struct {
	ID           int64          `json:"id" jsonschema:"the entry's id; ids grow with time"`
	At           time.Time      `json:"at" jsonschema:"when the call was made"`
	UserID       string         `json:"user_id,omitempty" jsonschema:"who made the call (absent for berth's own work)"`
	Username     string         `json:"username,omitempty" jsonschema:"the caller's username at the time"`
	TokenID      string         `json:"token_id,omitempty" jsonschema:"the token the call was made with"`
	Action       string         `json:"action" jsonschema:"what was done, e.g. server.exec"`
	ResourceType string         `json:"resource_type,omitempty" jsonschema:"the type of resource it was done to"`
	ResourceID   string         `json:"resource_id,omitempty" jsonschema:"the id of the resource it was done to"`
	Namespace    string         `json:"namespace,omitempty" jsonschema:"the resource's namespace"`
	Outcome      string         `json:"outcome" jsonschema:"ok, denied or error"`
	Detail       map[string]any `json:"detail,omitempty" jsonschema:"what else was recorded (names of env values, never the values)"`
}

// AuditPage is one page of the audit log, newest first.
type AuditPage struct {
	Entries []AuditEntry `json:"entries" jsonschema:"the entries, newest first"`
	// Scope says whose entries a query without user reached, which
	// depends on the caller's rights.
	Scope      string `json:"scope" jsonschema:"whose entries the page holds: all (every user's the caller may read) or own (only the caller's)"`
	NextCursor string `json:"next_cursor,omitempty" jsonschema:"pass as before to read the next, older page; absent on the last page"`
}

// filter checks q and turns it into a store filter, the actor left to
// AuditLog.
func (q AuditQuery) filter() (store.AuditFilter, error) {
	f := store.AuditFilter{Action: q.Action, TargetKind: q.ResourceType, TargetID: q.ResourceID, Namespace: q.Namespace,
		Since: q.Since, Until: q.Until, Limit: q.Limit}
	for _, field := range []struct{ name, v string }{
		{"user", q.User}, {"action", q.Action}, {"resource_type", q.ResourceType}, {"resource_id", q.ResourceID}, {"namespace", q.Namespace},
	} {
		if len(field.v) > maxAuditField {
			return f, wire.Errorf(wire.CodeBadRequest, "%s: want at most %d bytes, got %d", field.name, maxAuditField, len(field.v))
		}
	}
	switch {
	case q.Limit == 0:
		f.Limit = store.DefaultAuditLimit
	case q.Limit < 0 || q.Limit > store.MaxAuditLimit:
		return f, wire.Errorf(wire.CodeBadRequest, "limit: want 1 to %d, got %d", store.MaxAuditLimit, q.Limit)
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return f, wire.Errorf(wire.CodeBadRequest, "since: want a time before until (%s), got %s", q.Until.Format(time.RFC3339), q.Since.Format(time.RFC3339))
	}
	if q.Before != "" {
		id, err := strconv.ParseInt(q.Before, 10, 64)
		if err != nil || id <= 0 {
			return f, wire.Errorf(wire.CodeBadRequest, "before: want the next_cursor of an earlier page, got %q", q.Before)
		}
		f.BeforeID = id
	}
	return f, nil
}

// AuditLog returns a page of the audit log: the caller's own entries, or,
// for admins, everyone's (in a namespace they administer when namespace
// is given), filtered as q says.
func (s *Identity) AuditLog(ctx context.Context, p rbac.Principal, q AuditQuery) (AuditPage, error) {
	f, err := q.filter()
	if err != nil {
		return AuditPage{}, err
	}
	if p.UserID == "" {
		return AuditPage{}, &rbac.Denied{Reason: "request has no authenticated user"}
	}
	if !rbac.HasScope(p.Scopes, rbac.ScopeRead) {
		return AuditPage{}, &rbac.Denied{MissingScopes: []rbac.Scope{rbac.ScopeRead}, Reason: "token lacks scope \"berth:read\" needed to read the audit log"}
	}
	self := q.User != "" && !q.NamesOthers(p)
	page := AuditPage{Scope: "own"}
	// Others' entries need audit.read where they are; the caller's own
	// need nothing more, so a query naming nobody falls back to them.
	admin := rbac.Authorize(p, rbac.ActionAuditRead, rbac.Resource{Kind: "audit", Namespace: q.Namespace})
	switch {
	case self || (q.User == "" && admin != nil):
		f.ActorID = p.UserID
	case admin != nil:
		s.audit(ctx, p, string(rbac.ActionAuditRead), "user", q.User, q.Namespace, "denied", map[string]any{"reason": admin.Error()})
		return AuditPage{}, admin
	default:
		page.Scope = "all"
		if q.User != "" {
			if f.ActorID, err = s.userID(ctx, q.User); err != nil {
				return AuditPage{}, err
			}
		}
	}
	rows, err := s.store.ListAudit(ctx, f)
	if err != nil {
		return AuditPage{}, err
	}
	page.Entries = make([]AuditEntry, 0, len(rows))
	for _, e := range rows {
		page.Entries = append(page.Entries, AuditEntry{
			ID: e.ID, At: e.At, UserID: e.ActorID, Username: e.Actor, TokenID: e.TokenID, Action: e.Action,
			ResourceType: e.TargetKind, ResourceID: e.TargetID, Namespace: e.Namespace, Outcome: e.Outcome, Detail: e.Detail,
		})
	}
	if len(rows) == f.Limit {
		page.NextCursor = strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	return page, nil
}

// userID resolves a username or user id. A user id is taken as given: the
// log outlives the users it names.
func (s *Identity) userID(ctx context.Context, user string) (string, error) {
	if store.IsUUID(user) {
		return user, nil
	}
	u, err := s.store.UserByName(ctx, user)
	if err != nil {
		return "", err
	}
	return u.ID, nil
}
