package orchestrator

import (
	"context"
	"errors"
	"time"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Who may act on a sandbox. Every server records the owner of its
// sandbox (store.Server.RuntimeOwner, a runtime.Owner ID): a local
// runtime's sandboxes are processes of one host reached through sockets
// in one berth's data directory, so only that berth acts on them (starts,
// stops, reaches, reconciles and deletes them); a Kubernetes runtime's
// are reachable from every replica, which all report the same owner.
// Operations on a server are claimed only by replicas that may act on it
// (store.ClaimOperation), and direct calls reaching any other replica are
// answered with where to go instead (notHere).

// ownerOf is the owner rt reports, or none (every replica acts on every
// sandbox) for a runtime that names no owner.
func ownerOf(rt runtime.Runtime) runtime.Owner {
	if o, ok := runtime.As[runtime.Owned](rt); ok {
		return o.Owner()
	}
	return runtime.Owner{}
}

// canAct reports whether this replica may act on srv's sandbox: reach,
// start, stop, reconcile or delete it, and run its operations. It is the
// one test of ownership, in memory; notHere says why not to a caller.
func (s *Service) canAct(srv store.Server) bool {
	return store.ActsOn(s.owner.ID, srv.RuntimeOwner)
}

// ownerGoneAfter is how long an owner's replicas may be silent before
// its sandboxes are reported as out of reach: two leases, each renewed
// three times by a live replica (seeOwners).
func (s *Service) ownerGoneAfter() time.Duration { return 2 * s.cfg.OperationLease }

// notHere is nil when this replica can act on srv's sandbox, and
// otherwise the error a call for it answers: misdirected (421) naming the
// replica that holds the sandbox and where clients reach it, or
// unavailable (503) when that replica has not been seen for a while.
// Clients are told a host and a URL, never the owner's data directory.
func (s *Service) notHere(ctx context.Context, srv store.Server) error {
	if s.canAct(srv) {
		return nil
	}
	o, gone, err := s.ownerState(ctx, srv)
	switch {
	case err != nil:
		return err
	case gone:
		return s.goneError(srv, o)
	}
	where := "on " + o.Host
	if o.URL != "" {
		where += " (" + o.URL + ")"
	}
	return wire.Errorf(wire.CodeMisdirected, "server %s's sandbox is held by another berth replica, %s, whose local runtime alone reaches it; this replica (on %s) cannot: send calls for this server there",
		srv.ID, where, s.hostName())
}

// ownerGone is nil unless srv's sandbox belongs to another owner that has
// not been seen for a while, and then it is the error saying so: work
// scheduled for it would wait until that owner is back.
func (s *Service) ownerGone(ctx context.Context, srv store.Server) error {
	if s.canAct(srv) {
		return nil
	}
	o, gone, err := s.ownerState(ctx, srv)
	if err != nil || !gone {
		return err
	}
	return s.goneError(srv, o)
}

// ownerState loads the liveness record of srv's owner and says whether
// that owner is gone: silent for longer than ownerGoneAfter, or never
// seen at all.
func (s *Service) ownerState(ctx context.Context, srv store.Server) (store.RuntimeOwner, bool, error) {
	o, err := s.store.RuntimeOwnerByID(ctx, srv.RuntimeOwner)
	if errors.Is(err, store.ErrNotFound) {
		return store.RuntimeOwner{ID: srv.RuntimeOwner}, true, nil
	}
	if err != nil {
		return o, false, err
	}
	return o, o.Silent > s.ownerGoneAfter(), nil
}

func (s *Service) goneError(srv store.Server, o store.RuntimeOwner) error {
	where, since := "another replica", "it was never seen"
	if o.Host != "" {
		where = "the berth replica on " + o.Host
		if o.URL != "" {
			where += " (" + o.URL + ")"
		}
	}
	if !o.SeenAt.IsZero() {
		since = "it was last seen at " + o.SeenAt.UTC().Format(time.RFC3339)
	}
	return wire.Errorf(wire.CodeUnavailable, "server %s's sandbox is held by %s, which is gone (%s); no other replica can reach it. It answers again when that replica is back; stop_server frees its place in your quota at once, and its sandbox is deleted when that replica is back",
		srv.ID, where, since)
}

// hostName names this replica's host for messages.
func (s *Service) hostName() string {
	if s.owner.Host != "" {
		return s.owner.Host
	}
	return "this host"
}

// seeOwners records every lease/3 that this replica's runtime owner is
// alive, until ctx ends, so that other replicas can tell a sandbox out of
// their reach from one whose owner is gone. A runtime with no owner
// records nothing.
func (s *Service) seeOwners(ctx context.Context) {
	if s.owner.ID == "" {
		return
	}
	t := time.NewTicker(s.cfg.OperationLease / 3)
	defer t.Stop()
	for {
		err := s.store.SeeOwner(ctx, store.RuntimeOwner{ID: s.owner.ID, Name: s.owner.Name, Host: s.owner.Host, URL: s.cfg.PublicURL, Shared: s.owner.Shared})
		if err != nil && ctx.Err() == nil {
			s.log.Warn("record this replica's runtime alive", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Placement says which replica holds a server's sandbox, on runtimes
// where only that replica reaches it (the local runtime).
type Placement struct {
	Host       string     `json:"host" jsonschema:"the host of the berth replica that holds the sandbox"`
	URL        string     `json:"url,omitempty" jsonschema:"where that replica serves: send direct calls (files, shells, forwarding) for this server there"`
	LastSeenAt *time.Time `json:"last_seen_at,omitempty" jsonschema:"when that replica was last seen alive"`
	Gone       bool       `json:"gone" jsonschema:"that replica has not been seen for a while: the sandbox is out of reach until it is back"`
}

// placement describes where srv's sandbox is, or nil when every replica
// reaches it (or it has none yet).
func (s *Service) placement(ctx context.Context, srv store.Server) *Placement {
	if srv.RuntimeOwner == "" {
		return nil
	}
	o, gone, err := s.ownerState(ctx, srv)
	if err != nil {
		s.log.Warn("look up the owner of a sandbox", "server_id", srv.ID, "err", err)
		return nil
	}
	if o.Shared {
		return nil
	}
	p := &Placement{Host: o.Host, URL: o.URL, Gone: gone}
	if !o.SeenAt.IsZero() {
		seen := o.SeenAt
		p.LastSeenAt = &seen
	}
	return p
}
