//go:build !unix

package pgembed

import (
	"context"
	"fmt"
	goruntime "runtime"
)

// Cluster is a running embedded PostgreSQL server; none runs here.
type Cluster struct{}

// Start refuses: the embedded PostgreSQL is run as the data directory's
// owner with Unix sockets and permissions.
func Start(context.Context, Options) (*Cluster, error) {
	return nil, fmt.Errorf("the embedded PostgreSQL is not available on %s: pass --database-url (or BERTH_DATABASE_URL) to use a PostgreSQL server", goruntime.GOOS)
}

// Initialized reports that no embedded cluster exists here.
func Initialized(string) bool { return false }

// URL is never called: Start never succeeds here.
func (c *Cluster) URL() string { return "" }

// Adopted is never called: Start never succeeds here.
func (c *Cluster) Adopted() bool { return false }

// Stop has nothing to stop.
func (c *Cluster) Stop(context.Context) error { return nil }
