//go:build unix

package pgembed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// waitReady polls until the server accepts a connection or ctx ends.
func (c *Cluster) waitReady(ctx context.Context) error {
	delay := 20 * time.Millisecond
	for {
		conn, err := c.connect(ctx, "postgres")
		if err == nil {
			return conn.Close(ctx)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last attempt: %v)", ctx.Err(), err)
		case <-t.C:
		}
		delay = min(delay*2, time.Second)
	}
}

func (c *Cluster) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(c.urlFor(db))
	if err != nil {
		return nil, fmt.Errorf("parse connection string: %w", err)
	}
	cfg.ConnectTimeout = 5 * time.Second
	return pgx.ConnectConfig(ctx, cfg)
}

// ensureDatabase creates the configured database when it does not exist.
func (c *Cluster) ensureDatabase(ctx context.Context) error {
	conn, err := c.connect(ctx, "postgres")
	if err != nil {
		return fmt.Errorf("embedded postgres: connect via %s: %w", c.sockDir, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", c.db).Scan(&exists); err != nil {
		return fmt.Errorf("embedded postgres: look up database %q: %w", c.db, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.db}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" {
		return nil // created concurrently
	}
	if err != nil {
		return fmt.Errorf("embedded postgres: create database %q: %w", c.db, err)
	}
	c.log.Info("created database", "database", c.db)
	return nil
}
