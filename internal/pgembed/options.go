package pgembed

import "log/slog"

// Options configures Start.
type Options struct {
	// Dir is the cluster home, e.g. <data-dir>/pg. It is created if
	// missing and holds data/, run/ (the socket) and postgres.log.
	Dir    string
	Logger *slog.Logger
	// Database is created when missing; "" means "berth".
	Database string

	// searchRoot replaces /usr/lib/postgresql in the binary search, so
	// tests can point it at a directory without PostgreSQL.
	searchRoot string
}
