package store

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// rowError maps the error of a single-row query on a kind of object:
// no row becomes ErrNotFound naming the object, anything else is mapped and
// wrapped with it.
func rowError(err error, kind, id string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound("%s %q not found", kind, id)
	}
	return fmt.Errorf("%s %s: %w", kind, id, mapError(err))
}
