//go:build linux

package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/berth-mcp/berth/internal/runtime"
)

// identityFile, in the data directory, holds the runtime's owner id: made
// at the first start on a data directory and kept for its life, so that
// a berth restarted on it owns the sandboxes it adopts, and another
// berth (another data directory, maybe on another host) owns none of
// them.
const identityFile = "runtime-id"

var validIdentity = regexp.MustCompile(`^local-[0-9a-f-]{36}$`)

// loadIdentity reads the data directory's owner id, making one when it
// has none. The new id is written aside and linked into place, so two
// runtimes opening one fresh data directory at once agree on one id.
func loadIdentity(dataDir string) (string, error) {
	path := filepath.Join(dataDir, identityFile)
	for {
		b, err := readFileNoFollow(path, 256)
		if err == nil {
			id := strings.TrimSpace(string(b))
			if !validIdentity.MatchString(id) {
				return "", fmt.Errorf("%s does not hold a runtime id (local-<uuid>); it names the owner of this data directory's sandboxes in the database, so restore it rather than remove it", path)
			}
			return id, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("runtime id: %w", err)
		}
		id := "local-" + uuid.NewString()
		tmp, err := os.CreateTemp(dataDir, ".runtime-id-*")
		if err != nil {
			return "", fmt.Errorf("runtime id: %w", err)
		}
		_, err = tmp.WriteString(id + "\n")
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Link(tmp.Name(), path)
		}
		os.Remove(tmp.Name())
		switch {
		case err == nil:
			return id, nil
		case !errors.Is(err, os.ErrExist):
			return "", fmt.Errorf("runtime id: %w", err)
		}
		// Another runtime made it first: read theirs.
	}
}

// ownerOf names the owner of the sandboxes under dataDir: this host and
// that directory.
func ownerOf(id, dataDir string) runtime.Owner {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return runtime.Owner{ID: id, Name: host + ":" + dataDir, Host: host}
}

// Owner implements runtime.Owned: the sandboxes of a local runtime are
// processes of its host, reached through sockets in its data directory,
// so only the berth serving that directory can act on them.
func (r *Runtime) Owner() runtime.Owner { return r.owner }
