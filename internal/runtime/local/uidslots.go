//go:build linux

package local

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Every sandbox gets a block of host uids and gids of its own: root inside
// the sandbox is the block's first id, its other users follow. Blocks are
// allocated in a registry shared by every berth on the host, so no two
// live sandboxes ever share an id, whichever berth started them.

// uidSlots allocates id blocks. A claim is a file <registry>/<slot>
// naming the server directory that holds it and a random nonce the server
// directory repeats in its slot file; a claim whose server directory no
// longer repeats it is stale (its berth crashed, or its data directory
// was removed) and may be taken again once no process runs as its ids.
// Claims are made and reclaimed under an exclusive lock on the registry.
type uidSlots struct {
	dir   string
	base  int
	slots int
}

// slotFile is the file in a server directory that records its claim.
const slotFile = "uid-slot"

type slotClaim struct {
	slot  int
	nonce string
}

func (c slotClaim) uid(u uidSlots) int { return u.base + c.slot*idsPerSandbox }

func (u uidSlots) prepare() error {
	if u.base <= 0 || u.slots <= 0 || int64(u.base)+int64(u.slots)*idsPerSandbox > 1<<32-1 {
		return fmt.Errorf("uid range %d + %d blocks of %d does not fit in 32 bits", u.base, u.slots, idsPerSandbox)
	}
	if err := os.MkdirAll(u.dir, 0o700); err != nil {
		return fmt.Errorf("uid registry %s: %w", u.dir, err)
	}
	return checkPrivateDir(u.dir)
}

// withLock runs fn holding the registry's lock, which serializes every
// berth on the host.
func (u uidSlots) withLock(fn func() error) error {
	f, err := os.OpenFile(filepath.Join(u.dir, ".lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("uid registry lock: %w", err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("uid registry lock: %w", err)
	}
	return fn()
}

// claim returns serverDir's id block, allocating one if it has none.
func (u uidSlots) claim(serverDir string) (slotClaim, error) {
	var got slotClaim
	err := u.withLock(func() error {
		if c, ok := u.held(serverDir); ok {
			got = c
			return nil
		}
		nonce := make([]byte, 16)
		rand.Read(nonce)
		c := slotClaim{nonce: hex.EncodeToString(nonce)}
		for c.slot = 0; c.slot < u.slots; c.slot++ {
			ok, err := u.take(c, serverDir)
			if err != nil {
				return err
			}
			if ok {
				got = c
				return writeFileNoFollow(filepath.Join(serverDir, slotFile), []byte(fmt.Sprintf("%d %s\n", c.slot, c.nonce)))
			}
		}
		return fmt.Errorf("all %d sandbox uid blocks on this host are in use (registry %s)", u.slots, u.dir)
	})
	return got, err
}

// held reports the claim serverDir records, if the registry agrees.
func (u uidSlots) held(serverDir string) (slotClaim, bool) {
	c, err := readSlotFile(serverDir)
	if err != nil {
		return slotClaim{}, false
	}
	owner, nonce, err := u.readClaim(c.slot)
	return c, err == nil && owner == serverDir && nonce == c.nonce
}

// take claims slot c.slot for serverDir if it is free or stale.
func (u uidSlots) take(c slotClaim, serverDir string) (bool, error) {
	path := filepath.Join(u.dir, strconv.Itoa(c.slot))
	owner, nonce, err := u.readClaim(c.slot)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return false, err
	default:
		if theirs, err := readSlotFile(owner); err == nil && theirs.slot == c.slot && theirs.nonce == nonce {
			return false, nil // live
		}
	}
	// Free or stale, unless something runs as one of its ids: a
	// sandbox of a stale claim that lingers, or of a berth that keeps
	// another registry over the same ids.
	if busy, err := idsInUse(c.uid(u), idsPerSandbox); err != nil || busy {
		return false, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("reclaim uid block %d: %w", c.slot, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return false, fmt.Errorf("claim uid block %d: %w", c.slot, err)
	}
	_, err = fmt.Fprintf(f, "%s\n%s\n", serverDir, c.nonce)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err == nil, err
}

// release gives serverDir's block back.
func (u uidSlots) release(serverDir string) error {
	return u.withLock(func() error {
		c, ok := u.held(serverDir)
		if !ok {
			return nil
		}
		if err := os.Remove(filepath.Join(u.dir, strconv.Itoa(c.slot))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("release uid block %d: %w", c.slot, err)
		}
		return nil
	})
}

func (u uidSlots) readClaim(slot int) (owner, nonce string, err error) {
	b, err := readFileNoFollow(filepath.Join(u.dir, strconv.Itoa(slot)), 4096)
	if err != nil {
		return "", "", err
	}
	owner, nonce, _ = strings.Cut(strings.TrimSpace(string(b)), "\n")
	return owner, nonce, nil
}

func readSlotFile(serverDir string) (slotClaim, error) {
	b, err := readFileNoFollow(filepath.Join(serverDir, slotFile), 256)
	if err != nil {
		return slotClaim{}, err
	}
	var c slotClaim
	if _, err := fmt.Sscanf(string(b), "%d %s", &c.slot, &c.nonce); err != nil {
		return slotClaim{}, fmt.Errorf("slot file of %s: %w", serverDir, err)
	}
	return c, nil
}

// idsInUse reports whether any process on the host runs with a real,
// effective or saved uid in [first, first+n).
func idsInUse(first, n int) (bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue // exited meanwhile
		}
		for line := range strings.Lines(string(b)) {
			rest, ok := strings.CutPrefix(line, "Uid:")
			if !ok {
				continue
			}
			for _, f := range strings.Fields(rest) {
				if id, err := strconv.Atoi(f); err == nil && id >= first && id < first+n {
					return true, nil
				}
			}
			break
		}
	}
	return false, nil
}
