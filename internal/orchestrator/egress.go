package orchestrator

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// A server's network policy says what its sandbox may reach. berth keeps
// it on the server's row; the runtime's egress gateway reads it on every
// new connection the sandbox makes, so a change applies at once whichever
// replica carries the sandbox's traffic. The operator sets the default
// and the ceiling; a member chooses within the ceiling.

// DefaultEgress is the network policy of a server started without one,
// and the default ceiling: the public internet, never berth, its host,
// private ranges or cloud metadata (egress.Guard).
var DefaultEgress = egress.Policy{Egress: egress.Public}

func (c *Config) egressDefaults() error {
	if c.EgressCeiling.Egress == "" {
		c.EgressCeiling = egress.Ceiling(DefaultEgress)
	}
	if err := egress.Policy(c.EgressCeiling).Validate(); err != nil {
		return fmt.Errorf("egress ceiling: %w", err)
	}
	if c.EgressDefault.Egress == "" {
		c.EgressDefault = DefaultEgress
		if c.EgressCeiling.Permits(c.EgressDefault) != nil {
			c.EgressDefault = egress.Policy{Egress: egress.None}
		}
	}
	if err := c.EgressDefault.Validate(); err != nil {
		return fmt.Errorf("egress default: %w", err)
	}
	if err := c.EgressCeiling.Permits(c.EgressDefault); err != nil {
		return fmt.Errorf("the egress default is wider than the ceiling: %w", err)
	}
	return nil
}

// CarriesEgress says whether the runtime enforces network policies.
func (s *Service) CarriesEgress() bool { return s.carries }

// checkNetwork returns the policy a start or set_server_network asks for
// (nil: the operator's default), refusing one the runtime cannot
// enforce or that is wider than the operator's ceiling.
func (s *Service) checkNetwork(p *egress.Policy) (egress.Policy, error) {
	switch {
	case p == nil && !s.carries:
		return egress.Policy{}, nil
	case p == nil:
		return s.cfg.EgressDefault, nil
	case !s.carries:
		return egress.Policy{}, wire.Errorf(wire.CodeBadRequest, "network: this runtime (%s) does not enforce network policies, so berth accepts none rather than record one nothing applies", s.rt.Info().Name)
	}
	if err := p.Validate(); err != nil {
		return egress.Policy{}, wire.Errorf(wire.CodeBadRequest, "%w", err)
	}
	if err := s.cfg.EgressCeiling.Permits(*p); err != nil {
		return egress.Policy{}, wire.Errorf(wire.CodeForbidden, "%w", err)
	}
	return *p, nil
}

// SetServerNetworkRequest is set_server_network's input.
type SetServerNetworkRequest struct {
	ServerRef
	Network egress.Policy `json:"network" jsonschema:"the new policy: egress none, allowlist (with allow: domain names such as pypi.org or *.github.com, addresses or CIDRs, each optionally with :port) or public (the internet, never berth, its host, private ranges or cloud metadata)"`
}

// SetServerNetwork changes a server's network policy, within the
// operator's ceiling. Its sandbox's next connection is decided by it;
// open ones stay.
func (s *Service) SetServerNetwork(ctx context.Context, p rbac.Principal, req SetServerNetworkRequest) (Server, error) {
	srv, err := s.server(ctx, p, rbac.ActionServerUpdate, req.ServerID, req.ClientID)
	if err != nil {
		return Server{}, err
	}
	policy, err := s.checkNetwork(&req.Network)
	if err != nil {
		s.audit(ctx, p, "server.network", "server", srv.ID, srv.Namespace, "denied", map[string]any{"reason": err.Error(), "network": req.Network.String()})
		return Server{}, err
	}
	before := srv.Network
	err = s.store.InTx(ctx, func(tx pgx.Tx) error {
		srv, err = store.SetServerNetwork(ctx, tx, srv.ID, policy)
		return err
	})
	if err != nil {
		return Server{}, err
	}
	s.audit(ctx, p, "server.network", "server", srv.ID, srv.Namespace, "ok", map[string]any{
		"reason": fmt.Sprintf("network %s (was %s)", policy, before), "from": before.String(), "to": policy.String()})
	return serverView(srv), nil
}

// egressHooks are what the runtime's gateways ask of this service.
func (s *Service) egressHooks() runtime.EgressHooks {
	return runtime.EgressHooks{
		Server: func(ctx context.Context, id string) (egress.Policy, int64, error) {
			if isBuildSandbox(id) {
				// A build's commands install what the image needs: they
				// get the default a server would, and no server's count.
				return s.cfg.EgressDefault, 0, nil
			}
			e, err := s.store.GetServerEgress(ctx, id)
			if err != nil {
				return egress.Policy{}, 0, err
			}
			if e.Policy.Egress == "" {
				// Recorded before egress existed: nothing out.
				e.Policy = egress.Policy{Egress: egress.None}
			}
			return e.Policy, e.Bytes, nil
		},
		Refused: func(id string, r egress.Refusal) {
			if s.cfg.Observe.Egress != nil {
				s.cfg.Observe.Egress(r.Reason)
			}
			if isBuildSandbox(id) {
				s.log.Info("egress refused to an image build", "job", id, "refusal", r.Error())
				return
			}
			s.egressLog.add(id, r)
		},
		Allowed: func(string) {
			if s.cfg.Observe.Egress != nil {
				s.cfg.Observe.Egress("")
			}
		},
		Bytes: func(ctx context.Context, id string, n int64) error {
			if isBuildSandbox(id) {
				return nil
			}
			return s.store.SetEgressBytes(ctx, id, n)
		},
	}
}

// Refusals reach the database in batches: a sandbox refused in a tight
// loop costs one row per destination and reason per interval, and the
// pending set is bounded however fast it is refused.
const (
	egressLogInterval   = 2 * time.Second
	maxPendingRefusals  = 20 // per server and interval
	maxPendingServers   = 1000
	egressRefusalsShown = 10 // in get_server's events
)

// egressLog gathers refusals until writeEgressLog records them, and keeps
// each server's last few, so that a command that failed can say what was
// refused while it ran.
type egressLog struct {
	mu      sync.Mutex
	pending map[string][]store.EgressRefusal
	recent  map[string][]store.EgressRefusal
}

// maxRecentRefusals is how many of a server's last refusals a command's
// result may name.
const maxRecentRefusals = 5

func newEgressLog() *egressLog {
	return &egressLog{pending: map[string][]store.EgressRefusal{}, recent: map[string][]store.EgressRefusal{}}
}

// remember keeps r among its server's recent refusals; l.mu is held.
func (l *egressLog) remember(serverID string, r store.EgressRefusal) {
	rs, ok := l.recent[serverID]
	if !ok && len(l.recent) >= maxPendingServers {
		for id := range l.recent { // any one: this bound is only hit under abuse
			delete(l.recent, id)
			break
		}
	}
	for i := range rs {
		if rs[i].Name == r.Name && rs[i].Address == r.Address && rs[i].Reason == r.Reason {
			rs = append(rs[:i], rs[i+1:]...)
			break
		}
	}
	if len(rs) >= maxRecentRefusals {
		rs = rs[1:]
	}
	l.recent[serverID] = append(rs, r)
}

// since says the server's refusals from t on, oldest first.
func (l *egressLog) since(serverID string, t time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recent[serverID] {
		if !r.At.Before(t) {
			out = append(out, describeRefusal(r))
		}
	}
	return out
}

// add counts r with an equal pending refusal, or adds it while there is
// room; a refusal past the bounds is only counted by the metrics.
func (l *egressLog) add(serverID string, r egress.Refusal) {
	addr := ""
	if r.Addr.IsValid() {
		addr = r.Addr.String()
	} else if r.Name != "" && r.Port != 0 {
		// Refused before resolving: the port asked for still says which
		// service the sandbox wanted.
		r.Name = net.JoinHostPort(r.Name, strconv.Itoa(int(r.Port)))
	}
	at := r.Time
	if at.IsZero() {
		at = time.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.remember(serverID, store.EgressRefusal{At: at, Name: r.Name, Address: addr, Reason: r.Reason, Count: 1})
	rs, ok := l.pending[serverID]
	if !ok && len(l.pending) >= maxPendingServers {
		return
	}
	for i := range rs {
		if rs[i].Name == r.Name && rs[i].Address == addr && rs[i].Reason == r.Reason {
			rs[i].Count++
			rs[i].At = at
			return
		}
	}
	if len(rs) >= maxPendingRefusals {
		rs[len(rs)-1].Count++
		return
	}
	l.pending[serverID] = append(rs, store.EgressRefusal{At: at, Name: r.Name, Address: addr, Reason: r.Reason, Count: 1})
}

func (l *egressLog) take() map[string][]store.EgressRefusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.pending
	l.pending = map[string][]store.EgressRefusal{}
	return out
}

// writeEgressLog records the pending refusals every interval until ctx
// ends, and once more then.
func (s *Service) writeEgressLog(ctx context.Context) {
	t := time.NewTicker(egressLogInterval)
	defer t.Stop()
	write := func(ctx context.Context) {
		for id, rs := range s.egressLog.take() {
			if err := s.store.AddEgressRefusals(ctx, id, rs); err != nil && ctx.Err() == nil {
				s.log.Warn("record egress refusals", "server_id", id, "err", err)
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			write(wctx)
			cancel()
			return
		case <-t.C:
			write(ctx)
		}
	}
}

// egressEvents are a server's last refusals as events.
func (s *Service) egressEvents(ctx context.Context, srv store.Server) []runtime.Event {
	rs, err := s.store.ListEgressRefusals(ctx, srv.ID, egressRefusalsShown)
	if err != nil {
		s.log.Warn("egress refusals", "server_id", srv.ID, "err", err)
		return nil
	}
	out := make([]runtime.Event, 0, len(rs))
	for _, r := range rs {
		out = append(out, runtime.Event{Time: r.At, Type: "Warning", Reason: "EgressRefused", Message: describeRefusal(r), Count: int32(r.Count)})
	}
	return out
}

// describeRefusal says a refusal as the user reads it: "egress refused:
// 10.0.0.5:5432 (db.internal), private range".
func describeRefusal(r store.EgressRefusal) string {
	dest := r.Address
	switch {
	case dest == "":
		dest = r.Name
	case r.Name != "":
		dest += " (" + r.Name + ")"
	}
	return "egress refused: " + dest + ", " + r.Reason
}

// refusedDuring names what the egress gateway refused a server's
// sandbox since began, for the result of a command that failed (nil for
// one that did not: the refusals were then not its cause).
func (s *Service) refusedDuring(serverID string, began time.Time, failed bool) []string {
	if !failed {
		return nil
	}
	// The gateway's clock and this one are the same process's; a little
	// slack covers a refusal stamped as the command was being sent.
	return s.egressLog.since(serverID, began.Add(-time.Second))
}

// isBuildSandbox says whether a runtime's sandbox id is an image build's,
// which is no server's.
func isBuildSandbox(id string) bool { return strings.HasPrefix(id, buildSandboxPrefix) }
