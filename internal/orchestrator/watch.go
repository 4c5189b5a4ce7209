package orchestrator

import (
	"context"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/wire"
)

// MaxWatchesPerUser bounds the live pages (server-sent event streams) one
// user may hold open on one replica: each costs a goroutine and a
// connection, so a script opening streams without end must not exhaust
// the replica.
const MaxWatchesPerUser = 32

// Keys of watchers in events; ids are UUIDs, which hold no space.
func serverKey(id string) string    { return "server " + id }
func ownerKey(userID string) string { return "owner " + userID }

const allServersKey = "servers *"

// publishServer wakes the watchers of a server and of its owner's
// servers (and admins watching every server).
func (e *events) publishServer(id, owner string) {
	e.publish(serverKey(id), "")
	if owner != "" {
		e.publish(ownerKey(owner), "")
	}
	e.publish(allServersKey, "")
}

// watch subscribes userID to key, within MaxWatchesPerUser.
func (e *events) watch(userID, key string) (<-chan struct{}, func(), error) {
	e.mu.Lock()
	if e.watches[userID] >= MaxWatchesPerUser {
		e.mu.Unlock()
		return nil, nil, wire.Errorf(wire.CodeTooManyRequests, "too many live pages open: at most %d per user; close some", MaxWatchesPerUser)
	}
	e.watches[userID]++
	e.mu.Unlock()
	ch, unsubscribe := e.subscribe(key, everyChange)
	done := false
	return ch, func() {
		unsubscribe()
		e.mu.Lock()
		defer e.mu.Unlock()
		if !done {
			done = true
			if e.watches[userID]--; e.watches[userID] <= 0 {
				delete(e.watches, userID)
			}
		}
	}, nil
}

// WatchServer returns ticks for a server the caller may read: one comes
// whenever its status, error or owner changes or one of its operations
// changes status, and once more after this replica reconnects to the
// database (changes may have been missed). A tick says only that
// something changed: the caller reads what it shows again. Ticks that
// come while one is pending coalesce, so a slow reader holds one at most.
// Ticks come from PostgreSQL's notifications, so every replica delivers
// changes made on any replica, and nothing polls. stop ends the watch;
// the caller must call it.
func (s *Service) WatchServer(ctx context.Context, p rbac.Principal, serverID string) (ticks <-chan struct{}, stop func(), err error) {
	if _, err := s.server(ctx, p, rbac.ActionServerRead, serverID, ""); err != nil {
		return nil, nil, err
	}
	return s.events.watch(p.UserID, serverKey(serverID))
}

// WatchServers is WatchServer for the list of the caller's servers
// (ListServers): a tick whenever one of them is created or changes
// status, error or owner. A global admin, whose list holds every server,
// hears of every server.
func (s *Service) WatchServers(ctx context.Context, p rbac.Principal) (ticks <-chan struct{}, stop func(), err error) {
	if err := requireScope(p, rbac.ActionServerRead); err != nil {
		return nil, nil, err
	}
	key := ownerKey(p.UserID)
	if p.IsAdmin("") {
		key = allServersKey
	}
	return s.events.watch(p.UserID, key)
}
