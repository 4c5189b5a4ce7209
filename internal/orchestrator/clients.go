package orchestrator

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

var namespaceRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func checkNamespace(ns string) error {
	if !namespaceRE.MatchString(ns) {
		return wire.Errorf(wire.CodeBadRequest, "namespace %q: want an RFC 1123 label (lower-case letters, digits and '-', at most 63)", ns)
	}
	return nil
}

func clientResource(c store.Client) rbac.Resource {
	return rbac.Resource{Kind: "client", Namespace: c.Namespace, OwnerID: c.OwnerID}
}

// RegisterClient creates a client owned by the caller.
func (s *Service) RegisterClient(ctx context.Context, p rbac.Principal, req RegisterClientRequest) (Client, error) {
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" || len(req.Name) > 128 {
		return Client{}, wire.Errorf(wire.CodeBadRequest, "name: want 1 to 128 characters")
	}
	if req.Namespace == "" {
		req.Namespace = s.cfg.DefaultNamespace
	}
	if err := checkNamespace(req.Namespace); err != nil {
		return Client{}, err
	}
	if req.NodesCount < 0 || req.NodesCount > 1000 {
		return Client{}, wire.Errorf(wire.CodeBadRequest, "nodes_count: want 0 to 1000, got %d", req.NodesCount)
	}
	if err := s.authorize(ctx, p, rbac.ActionClientCreate, rbac.Resource{Kind: "client", Namespace: req.Namespace}, ""); err != nil {
		return Client{}, err
	}
	c, err := s.store.CreateClient(ctx, p.UserID, req.Name, req.Namespace, req.NodesCount)
	s.audit(ctx, p, "client.register", "client", c.ID, req.Namespace, outcome(err), map[string]any{"name": req.Name, "nodes_count": req.NodesCount})
	if err != nil {
		return Client{}, err
	}
	out := clientView(c)
	holder, ok := runtime.As[runtime.NodeHolder](s.rt)
	switch {
	case req.NodesCount > 0 && !ok:
		out.Notice = fmt.Sprintf("nodes_count %d recorded; the %s runtime does not pre-provision nodes (a Kubernetes feature)", req.NodesCount, s.rt.Info().Name)
	case req.NodesCount > 0:
		if err := holder.HoldNodes(ctx, c.Namespace, c.ID, req.NodesCount); err != nil {
			s.log.Error("hold nodes", "client_id", c.ID, "err", err)
			out.Notice = fmt.Sprintf("nodes_count %d recorded, but berth could not hold the nodes: %v", req.NodesCount, err)
		}
		out = s.withNodes(ctx, out)
	}
	return out, nil
}

// withNodes adds how many nodes the runtime holds for a client that asked
// for some.
func (s *Service) withNodes(ctx context.Context, c Client) Client {
	holder, ok := runtime.As[runtime.NodeHolder](s.rt)
	if !ok || c.NodesCount == 0 {
		return c
	}
	n, err := holder.HeldNodes(ctx, c.Namespace, c.ID)
	if err != nil {
		s.log.Warn("count held nodes", "client_id", c.ID, "err", err)
		return c
	}
	c.NodesHeld = &n
	return c
}

// client loads a client and checks the caller may do a to it.
func (s *Service) client(ctx context.Context, p rbac.Principal, a rbac.Action, id string) (store.Client, error) {
	c, err := s.store.ClientByID(ctx, id)
	if err != nil {
		return store.Client{}, err
	}
	if err := s.authorize(ctx, p, a, clientResource(c), id); err != nil {
		return store.Client{}, err
	}
	return c, nil
}

// GetClient returns one of the caller's clients.
func (s *Service) GetClient(ctx context.Context, p rbac.Principal, id string) (Client, error) {
	c, err := s.client(ctx, p, rbac.ActionClientRead, id)
	if err != nil {
		return Client{}, err
	}
	return s.withNodes(ctx, clientView(c)), nil
}

// ListClients returns the caller's clients (everyone's for global admins).
func (s *Service) ListClients(ctx context.Context, p rbac.Principal) ([]Client, error) {
	if err := requireScope(p, rbac.ActionClientRead); err != nil {
		return nil, err
	}
	owner := p.UserID
	if p.IsAdmin("") {
		owner = ""
	}
	cs, err := s.store.ListClients(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := make([]Client, 0, len(cs))
	for _, c := range cs {
		if rbac.Authorize(p, rbac.ActionClientRead, clientResource(c)) == nil {
			out = append(out, s.withNodes(ctx, clientView(c)))
		}
	}
	return out, nil
}

// HeartbeatClient keeps a client and its servers from being reaped as
// idle.
func (s *Service) HeartbeatClient(ctx context.Context, p rbac.Principal, id string) (Client, error) {
	if _, err := s.client(ctx, p, rbac.ActionClientUpdate, id); err != nil {
		return Client{}, err
	}
	c, err := s.store.HeartbeatClient(ctx, id)
	return withClientView(c, err)
}

// FinishClient marks the client and its live servers finished: their
// resources stay and a later start with reuse can take them.
func (s *Service) FinishClient(ctx context.Context, p rbac.Principal, id string) (Client, error) {
	c, err := s.client(ctx, p, rbac.ActionClientUpdate, id)
	if err != nil {
		return Client{}, err
	}
	if c.Status == ClientStopped {
		return Client{}, wire.Errorf(wire.CodeConflict, "client %s is stopped", id)
	}
	servers, err := s.store.ListServers(ctx, store.ServerFilter{ClientID: id, Statuses: []string{ServerRunning}})
	if err != nil {
		return Client{}, err
	}
	for _, srv := range servers {
		if _, err := s.finishServer(ctx, srv); err != nil {
			return Client{}, err
		}
	}
	c, err = s.store.SetClientStatus(ctx, id, ClientFinished)
	s.audit(ctx, p, "client.finish", "client", id, c.Namespace, outcome(err), map[string]any{"servers": len(servers)})
	return withClientView(c, err)
}

// StopClient stops the client and deletes its servers' resources.
func (s *Service) StopClient(ctx context.Context, p rbac.Principal, id string) (Client, error) {
	c, err := s.client(ctx, p, rbac.ActionClientDelete, id)
	if err != nil {
		return Client{}, err
	}
	servers, err := s.store.ListServers(ctx, store.ServerFilter{ClientID: id,
		Statuses: []string{ServerStarting, ServerRunning, ServerFinished, ServerStopping}})
	if err != nil {
		return Client{}, err
	}
	var stopErr error
	for _, srv := range servers {
		if _, err := s.stopServer(ctx, srv, stopWait); err != nil && stopErr == nil {
			stopErr = err
		}
	}
	if stopErr != nil {
		return Client{}, fmt.Errorf("stop client %s: %w", id, stopErr)
	}
	if holder, ok := runtime.As[runtime.NodeHolder](s.rt); ok && c.NodesCount > 0 {
		if err := holder.HoldNodes(ctx, c.Namespace, c.ID, 0); err != nil {
			return Client{}, fmt.Errorf("stop client %s: %w", id, err)
		}
	}
	c, err = s.store.SetClientStatus(ctx, id, ClientStopped)
	s.audit(ctx, p, "client.stop", "client", id, c.Namespace, outcome(err), map[string]any{"servers": len(servers)})
	return withClientView(c, err)
}
