package egresstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// slotLock is one slot held by this process: an exclusive flock on the
// slot's lock file, released when the file is closed or the process dies,
// so a crashed test binary never keeps a slot.
type slotLock struct {
	f *os.File
	n int
}

func lockPath(n int) string { return fmt.Sprintf("/run/berth-egresstest-%d.lock", n) }

// acquireSlot takes the first free slot, and waits for one only when all
// are taken (other test binaries on the machine hold them), until ctx
// ends.
func acquireSlot(ctx context.Context) (*slotLock, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for n := range Slots {
			l, err := tryLock(n)
			if err != nil {
				return nil, err
			}
			if l != nil {
				return l, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for a free slot (all %d of /run/berth-egresstest-N.lock are held by other tests): %w", Slots, ctx.Err())
		case <-tick.C:
		}
	}
}

// tryLock returns slot n's lock, or nil when another holder has it.
func tryLock(n int) (*slotLock, error) {
	f, err := os.OpenFile(lockPath(n), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open slot lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath(n), err)
	}
	return &slotLock{f: f, n: n}, nil
}

func (l *slotLock) release() error { return l.f.Close() }

// Names of what a slot makes in the host: fixed per slot, so that a slot's
// leftovers from a crashed run can be found and removed by whoever takes
// the slot next.
func hostLinkName(n int) string      { return fmt.Sprintf("berthinet%d", n) }
func namespacePrefix(n int) string   { return fmt.Sprintf("berth-inet-%d-", n) }
func clientNSPrefix(n int) string    { return fmt.Sprintf("berth-inetc-%d-", n) }
func etcNetnsDir(name string) string { return filepath.Join("/etc/netns", name) }

// sweep removes what a crashed earlier holder of slot n left behind: its
// namespaces, its clients' namespaces and their resolv.conf, and the
// host's end of its link (with the routes through it). It must only run
// while holding the slot's lock.
func sweep(ctx context.Context, n int) error {
	var errs []error
	for _, dir := range []string{"/run/netns", "/etc/netns"} {
		entries, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("list %s: %w", dir, err))
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasPrefix(name, namespacePrefix(n)) && !strings.HasPrefix(name, clientNSPrefix(n)) {
				continue
			}
			if dir == "/run/netns" {
				if err := ipCmd(ctx, "netns", "del", name); err != nil {
					errs = append(errs, err)
				}
			} else if err := os.RemoveAll(etcNetnsDir(name)); err != nil {
				errs = append(errs, fmt.Errorf("remove leftover %s: %w", etcNetnsDir(name), err))
			}
		}
	}
	// A namespace just deleted takes its end of the link with it, but
	// only once the kernel gets round to it: the link is deleted here so
	// it is surely gone, unless it went meanwhile.
	if linkExists(hostLinkName(n)) {
		if err := ipCmd(ctx, "link", "del", hostLinkName(n)); err != nil && linkExists(hostLinkName(n)) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// linkExists says whether the host has a network interface of that name.
func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}
