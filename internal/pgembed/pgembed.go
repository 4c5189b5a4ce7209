//go:build unix

// Package pgembed runs the PostgreSQL cluster that `berth serve` uses when no
// --database-url is given. It owns the cluster's files under one directory,
// starts postgres listening only on a unix socket inside that directory (no
// TCP port, so it never clashes with another server), and stops it again.
//
// Authentication is trust over the socket; the socket directory is mode 0700,
// so only the user that owns the cluster (and root) can connect.
package pgembed

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

const (
	defaultDatabase = "berth"
	defaultRoot     = "/usr/lib/postgresql"
	superuser       = "postgres"
	port            = 5432
	// startTimeout bounds how long pg_ctl waits for the server; crash
	// recovery after an unclean shutdown can take a while.
	startTimeout = 300 * time.Second
	stopTimeout  = 120 * time.Second
)

// Cluster is a running embedded PostgreSQL server.
type Cluster struct {
	bins    binaries
	as      runAs
	dir     string
	dataDir string
	sockDir string
	port    int
	db      string
	log     *slog.Logger
	adopted bool // the server was already running when Start was called

	mu      sync.Mutex
	stopped bool
}

// Start initializes the cluster on first use (initdb), starts postgres
// listening only on a unix socket, waits until it accepts connections and
// creates the database when missing. A server of this cluster left running
// by an earlier process is adopted instead of started twice. The caller
// must call Stop.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := newCluster(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := c.prepareDirs(); err != nil {
		return nil, err
	}
	if err := c.initdb(ctx); err != nil {
		return nil, err
	}
	running, err := c.running(ctx)
	if err != nil {
		return nil, err
	}
	if running {
		if err := c.adopt(ctx); err != nil {
			return nil, err
		}
	} else if err := c.start(ctx); err != nil {
		return nil, err
	}
	if err := c.ensureDatabase(ctx); err != nil {
		// A server we cannot use must not outlive the failed Start.
		c.stopAfterFailure()
		return nil, err
	}
	return c, nil
}

// Initialized reports whether dir (a cluster home, as Options.Dir) holds
// a cluster Start created, so that commands which must not create one can
// tell.
func Initialized(dir string) bool { return dataVersion(filepath.Join(dir, "data")) != 0 }

func newCluster(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, wire.Errorf(wire.CodeBadRequest, "embedded postgres: no cluster directory given")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: resolve %s: %w", opts.Dir, err)
	}
	if err := checkPathChars(dir); err != nil {
		return nil, err
	}
	db := opts.Database
	if db == "" {
		db = defaultDatabase
	}
	if err := checkDatabaseName(db); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	root := opts.searchRoot
	if root == "" {
		root = defaultRoot
	}
	dataDir := filepath.Join(dir, "data")
	bins, err := findBinaries(ctx, os.Getenv("PATH"), root, dataVersion(dataDir))
	if err != nil {
		return nil, err
	}
	as, err := currentRunAs()
	if err != nil {
		return nil, err
	}
	return &Cluster{
		bins:    bins,
		as:      as,
		dir:     dir,
		dataDir: dataDir,
		port:    port,
		db:      db,
		log:     log.With("component", "pgembed", "dir", dir),
	}, nil
}

// URL returns the pgx connection string of the database, using the socket
// directory as host.
func (c *Cluster) URL() string {
	return c.urlFor(c.db)
}

func (c *Cluster) urlFor(db string) string {
	q := url.Values{}
	q.Set("host", c.sockDir)
	q.Set("port", strconv.Itoa(c.port))
	q.Set("sslmode", "disable")
	u := url.URL{Scheme: "postgres", User: url.User(superuser), Path: "/" + db, RawQuery: q.Encode()}
	return u.String()
}

// Stop shuts the server down with pg_ctl stop -m fast and waits until it is
// gone. Calling it again, or on a server that is already down, is a no-op.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	out, err := c.pgctl(ctx, "stop", "-D", c.dataDir, "-m", "fast", "-w", "-t", seconds(stopTimeout))
	if err != nil {
		running, serr := c.running(ctx)
		if serr != nil || running {
			return fmt.Errorf("embedded postgres: stop %s: %w: %s", c.dataDir, err, out)
		}
	}
	c.stopped = true
	c.log.Info("embedded postgres stopped")
	return nil
}

// stopAfterFailure stops a server that Start launched or adopted but could
// not hand out; it runs even when Start's context is already cancelled.
func (c *Cluster) stopAfterFailure() {
	ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		c.log.Error("embedded postgres: stop after failed start", "err", err)
	}
}

func seconds(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }

// Adopted reports whether Start found the server already running (left by
// an earlier process or run by another berth command) instead of starting
// it. Nobody stops a server it adopted: whoever started it may still be
// using it.
func (c *Cluster) Adopted() bool { return c.adopted }
