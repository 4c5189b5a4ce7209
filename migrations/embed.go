// Package migrations holds berth's PostgreSQL schema as goose SQL files,
// embedded so the server binary migrates its database without any file on
// disk. Files are applied in version order by internal/store.Migrate; a
// released file is never edited, a change is a new file.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
