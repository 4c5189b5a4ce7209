package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-mcp/berth/migrations"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Migrate applies the pending migrations of the migrations package.
func (s *Store) Migrate(ctx context.Context) error { return Migrate(ctx, s.Pool) }

// Migrate applies the pending migrations on pool's database. It holds a
// PostgreSQL session advisory lock while it works, so replicas that start
// together migrate one after the other; the later ones find nothing to do.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (err error) {
	// Poll the lock every second for up to 10 minutes: a replica waiting on
	// another's long migration should wait, not fail.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 600))
	if err != nil {
		return fmt.Errorf("migrate: session locker: %w", err)
	}
	// Closing this *sql.DB releases its connections to pool, which stays open.
	db := stdlib.OpenDBFromPool(pool)
	defer func() { err = errors.Join(err, db.Close()) }()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
