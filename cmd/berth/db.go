package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berth-mcp/berth/internal/dirlock"
	"github.com/berth-mcp/berth/internal/pgembed"
	"github.com/berth-mcp/berth/internal/process"
	"github.com/berth-mcp/berth/internal/store"
)

// dbFlags are the flags every command that talks to the database shares,
// so `berth token create` finds the same database as `berth serve`.
type dbFlags struct {
	databaseURLString string
	databaseURLFile   string
	dataDir           string
	flags             *pflag.FlagSet // to tell a URL on argv from one in the environment
	// tracer, when set (serve with tracing on), sees every query.
	tracer pgx.QueryTracer
}

func (f *dbFlags) register(cmd *cobra.Command) {
	f.flags = cmd.Flags()
	cmd.Flags().StringVar(&f.databaseURLString, "database-url", "", "PostgreSQL URL; prefer env BERTH_DATABASE_URL or --database-url-file, since the command line is visible to other processes; empty = an embedded cluster under <data-dir>/pg")
	cmd.Flags().StringVar(&f.databaseURLFile, "database-url-file", "", "file holding the PostgreSQL URL, readable by its owner only (env BERTH_DATABASE_URL_FILE)")
	cmd.Flags().StringVar(&f.dataDir, "data-dir", ".berth", "directory for berth's local state (env BERTH_DATA_DIR)")
}

// openDB connects to the configured database, starting the embedded
// cluster when no URL is given, and applies the migrations. The returned
// function closes the pool and stops the embedded cluster if this process
// started it. A cluster found running (adopted) is never stopped, by the
// server neither: someone else started it and may still use it. serve
// says the caller is `berth serve`, which holds the data directory's lock.
func (f *dbFlags) openDB(ctx context.Context, log *slog.Logger, serve bool) (*store.Store, func(), error) {
	url, err := f.databaseURL(log)
	if err != nil {
		return nil, nil, err
	}
	var cluster *pgembed.Cluster
	var clusterDir string
	if url == "" {
		if !serve {
			// Only serve creates a berth: a command run elsewhere would
			// otherwise make a new, empty one and act on that (a token
			// the running server has never heard of).
			if err := f.existingCluster(); err != nil {
				return nil, nil, err
			}
		}
		if err := os.MkdirAll(f.dataDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("data dir: %w", err)
		}
		dir, err := filepath.Abs(filepath.Join(f.dataDir, "pg"))
		if err != nil {
			return nil, nil, err
		}
		cluster, err = pgembed.Start(ctx, pgembed.Options{Dir: dir, Logger: log})
		if err != nil {
			return nil, nil, fmt.Errorf("embedded database: %w", err)
		}
		url, clusterDir = cluster.URL(), dir
		if cluster.Adopted() {
			log.Info("using an embedded database that was already running", "dir", dir)
		} else {
			recordStarter(dir, log)
		}
	}
	stopCluster := func() {
		if cluster == nil {
			return
		}
		if cluster.Adopted() {
			// The server, which holds the data directory's lock, takes
			// over a cluster whose starter is gone (a server that
			// crashed, a command that left it to a server): nobody else
			// can be using it, and left alone it would run for ever.
			if !serve || starterRunning(clusterDir) {
				return
			}
			log.Info("stopping the embedded database, whose starter is gone")
		}
		if !serve {
			// A server started since may have adopted the cluster this
			// command started; it is that server's to use now.
			lock, err := dirlock.TryLock(f.dataDir, dirlock.Holder{PID: os.Getpid(), Command: "a berth command stopping the embedded database it started"})
			if err != nil {
				log.Info("leaving the embedded database running", "reason", err)
				return
			}
			defer lock.Close()
		}
		if err := cluster.Stop(context.WithoutCancel(ctx)); err != nil {
			log.Error("stop embedded database", "err", err)
		}
	}
	st, err := store.OpenTraced(ctx, url, f.tracer)
	if err != nil {
		stopCluster()
		return nil, nil, err
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		stopCluster()
		return nil, nil, fmt.Errorf("migrate: %w", err)
	}
	return st, func() { st.Close(); stopCluster() }, nil
}

// existingCluster checks that the data directory holds the embedded
// database a `berth serve` created, saying where it looked when not.
func (f *dbFlags) existingCluster() error {
	abs, err := filepath.Abs(f.dataDir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no berth data directory at %s (start one with `berth serve --data-dir %s` or pass --data-dir / --database-url)", abs, f.dataDir)
	} else if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if !pgembed.Initialized(filepath.Join(abs, "pg")) {
		return fmt.Errorf("no berth database in the data directory %s (its server may use --database-url: pass the same --database-url, or start one with `berth serve --data-dir %s`)", abs, f.dataDir)
	}
	return nil
}

func newMigrateCmd(e *env) *cobra.Command {
	var db dbFlags
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, closeDB, err := db.openDB(cmd.Context(), e.logger("warn"), false)
			if err != nil {
				return err
			}
			closeDB()
			fmt.Fprintln(e.stderr, "migrations applied")
			return nil
		},
	}
	db.register(cmd)
	return cmd
}

// starterFile, in the embedded cluster's directory, names the process
// that started the running cluster.
const starterFile = "started-by.json"

func recordStarter(dir string, log *slog.Logger) {
	self, err := process.Self()
	if err == nil {
		b, _ := json.Marshal(self)
		err = os.WriteFile(filepath.Join(dir, starterFile), b, 0o600)
	}
	if err != nil {
		log.Warn("record who started the embedded database", "err", err)
	}
}

// starterRunning reports whether the process that started the cluster in
// dir still runs; without a record, it is assumed to.
func starterRunning(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, starterFile))
	if err != nil {
		return true
	}
	var id process.ID
	if json.Unmarshal(b, &id) != nil {
		return true
	}
	return id.Running()
}
