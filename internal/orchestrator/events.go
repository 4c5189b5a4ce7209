package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-mcp/berth/internal/store"
)

// notifyChannel is where the operations trigger announces status changes
// ("<id> <status> <server id>"); serverChannel is where the servers
// trigger announces a server's changes ("<id> <status> <owner id>").
const (
	notifyChannel = "berth_operations"
	serverChannel = "berth_servers"
)

// events listens to operation and server changes on one dedicated
// database connection and fans them out: to this replica's workers (new
// work), to callers waiting for a specific operation (wait_seconds), and
// to watchers of a server or of a user's servers (the console's live
// pages). Nobody polls: each sleeps until a notification names what it
// waits for. Keys are operation ids, or serverKey, ownerKey and
// allServersKey values, which cannot be taken for an id.
type events struct {
	store *store.Store
	log   *slog.Logger
	wake  func()

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]wants
	// listening is closed once LISTEN is first active, so a waiter that
	// subscribes after it cannot miss a notification. Run may be started
	// again after it returned, hence the Once.
	listening     chan struct{}
	listeningOnce sync.Once
	// watches counts each user's watchers on this replica (watch.go).
	watches map[string]int
}

func newEvents(st *store.Store, log *slog.Logger, wake func()) *events {
	return &events{store: st, log: log, wake: wake, waiters: map[string]map[chan struct{}]wants{}, listening: make(chan struct{}),
		watches: map[string]int{}}
}

// wants is which of an operation's status changes a subscriber hears.
type wants int

const (
	// everyChange: callers waiting for a result, who also report
	// progress (scheduled, then working).
	everyChange wants = iota
	// leaveChanges: only a status that takes the operation from its
	// lease holder (cancelled, finished by another). The holder's own
	// IN_PROGRESS, announced by the insert of an inline run or by its
	// claim, says nothing it does not know, and renewing the lease on it
	// cost every command a durable UPDATE, often still in flight when the
	// command ended, so that cancelling it closed a pooled connection.
	leaveChanges
	// progressChanges: only a change of the operation's recorded
	// progress (a start's pull), which a caller waiting for an inline
	// run reports; its status it learns from the run itself.
	progressChanges
)

// subscribe returns a channel that receives a value whenever what key
// names changes (an operation's status, for an operation id, as w says),
// and a function to unsubscribe. The channel holds one value at most:
// changes that come while one is pending coalesce into it, so a slow
// subscriber costs nothing more than a quick one.
func (e *events) subscribe(opID string, w wants) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	e.mu.Lock()
	if e.waiters[opID] == nil {
		e.waiters[opID] = map[chan struct{}]wants{}
	}
	e.waiters[opID][ch] = w
	e.mu.Unlock()
	return ch, func() {
		e.mu.Lock()
		delete(e.waiters[opID], ch)
		if len(e.waiters[opID]) == 0 {
			delete(e.waiters, opID)
		}
		e.mu.Unlock()
	}
}

// publish tells opID's subscribers its status changed to status ("":
// unknown, after a reconnect, which every subscriber hears).
func (e *events) publish(opID, status string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch, w := range e.waiters[opID] {
		if w == leaveChanges && status == OpInProgress || w == progressChanges && status != "" {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// publishProgress tells opID's subscribers that want it that its
// progress changed.
func (e *events) publishProgress(opID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ch, w := range e.waiters[opID] {
		if w == everyChange || w == progressChanges {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

// publishAll wakes every waiter, after a reconnect during which
// notifications may have been lost; each re-reads its operation.
func (e *events) publishAll() {
	e.mu.Lock()
	ids := make([]string, 0, len(e.waiters))
	for id := range e.waiters {
		ids = append(ids, id)
	}
	e.mu.Unlock()
	for _, id := range ids {
		e.publish(id, "")
	}
	e.wake()
}

// run listens until ctx ends, reconnecting with backoff when the
// connection drops.
func (e *events) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := e.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		e.log.Warn("operation events: connection lost; reconnecting", "err", err, "in", backoff)
		if serverEndedConnection(err) {
			// The server ended this connection, so it likely ended the
			// pool's idle ones too (a restart, a failover): drop them now
			// rather than have the next calls fail on them one by one.
			e.store.Pool.Reset()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (e *events) listen(ctx context.Context) error {
	conn, err := acquire(ctx, e.store.Pool)
	if err != nil {
		return err
	}
	defer conn.Release()
	for _, ch := range []string{notifyChannel, serverChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return err
		}
	}
	defer func() {
		// Bounded: on a dead connection an unbounded UNLISTEN would keep
		// Run from returning.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		conn.Exec(uctx, "UNLISTEN *")
	}()
	e.listeningOnce.Do(func() { close(e.listening) })
	// Notifications sent while this replica was not listening (before a
	// reconnect, or before Run started again) are lost: waiters re-read.
	e.publishAll()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == serverChannel {
			id, rest, _ := strings.Cut(n.Payload, " ")
			_, owner, _ := strings.Cut(rest, " ")
			e.publishServer(id, owner)
			continue
		}
		id, rest, _ := strings.Cut(n.Payload, " ")
		status, rest, _ := strings.Cut(rest, " ")
		server, what, _ := strings.Cut(rest, " ")
		if what == "progress" {
			e.publishProgress(id)
		} else {
			e.publish(id, status)
		}
		if server != "" {
			e.publish(serverKey(server), "")
		}
		// Only a scheduled operation is work for the workers: one
		// inserted IN_PROGRESS is claimed already (an inline run), and
		// waking a worker for it costs a claim that finds nothing, on
		// every replica, for every command.
		if status == OpScheduled {
			e.wake()
		}
	}
}

func acquire(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, error) {
	return pool.Acquire(ctx)
}

// serverEndedConnection reports whether err says the database server
// closed the connection: an administrator's termination, a shutdown or a
// crash of the server (SQLSTATE class 57P).
func serverEndedConnection(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "57P")
}
