// Package dirlock keeps a berth data directory to one `berth serve`. The
// server takes an exclusive flock on <data-dir>/serve.lock before it
// touches the database or the sandboxes there, and keeps it until it
// exits; the kernel drops the lock when the process dies, however it dies,
// so a crashed server never leaves a stale lock behind. The file holds a
// small JSON record of the holder (pid, command, URL), so that a second
// server can say which one is running instead of only that one is.
package dirlock

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// FileName is the lock file inside the data directory.
const FileName = "serve.lock"

// Holder describes the process holding the lock.
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	URL     string    `json:"url,omitempty"`
	Since   time.Time `json:"since"`
}

// Lock is a held lock on a data directory.
type Lock struct {
	f *os.File
}

// HeldError says the data directory is locked by another process.
type HeldError struct {
	Path string
	// Holder is the holder's record; zero when it could not be read (the
	// holder may be writing it at this moment).
	Holder Holder
}

func (e *HeldError) Error() string {
	h := e.Holder
	if h.PID == 0 {
		return fmt.Sprintf("%s is locked by another berth process (its record is not readable yet)", e.Path)
	}
	where := h.URL
	if where == "" {
		where = "not listening yet"
	}
	return fmt.Sprintf("%s is held by %s (pid %d, %s, since %s)", e.Path, h.Command, h.PID, where, h.Since.Local().Format(time.DateTime))
}

// TryLock takes the lock of dir without waiting and records h as its
// holder. When another process holds it, the error is a *HeldError naming
// that process.
func TryLock(dir string, h Holder) (*Lock, error) {
	return TryLockFile(filepath.Join(dir, FileName), h)
}

// TryLockFile is TryLock on the lock file path, for locks other than a
// data directory's (the CLI's token refresh).
func TryLockFile(path string, h Holder) (*Lock, error) {
	// O_CLOEXEC (Go's default) matters: a child that inherited the
	// descriptor (an agent, the embedded PostgreSQL) would keep the lock
	// after berth exits.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if held, err := lockExclusive(f); err != nil || held {
		defer f.Close()
		if held {
			return nil, &HeldError{Path: path, Holder: readHolder(f)}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	l := &Lock{f: f}
	if err := l.Update(h); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Update rewrites the holder's record, e.g. once the URL is known.
func (l *Lock) Update(h Holder) error {
	if h.Since.IsZero() {
		h.Since = time.Now()
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("write lock record: %w", err)
	}
	if _, err := l.f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("write lock record: %w", err)
	}
	return nil
}

// Close releases the lock. The file stays: removing it would let a
// process that opened it just before lock a file nobody else sees.
func (l *Lock) Close() error { return l.f.Close() }

func readHolder(f *os.File) Holder {
	var h Holder
	b := make([]byte, 4096)
	n, _ := f.ReadAt(b, 0)
	if json.Unmarshal([]byte(strings.TrimSpace(string(b[:n]))), &h) != nil {
		return Holder{}
	}
	return h
}
