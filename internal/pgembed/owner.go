//go:build unix

package pgembed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/berth-mcp/berth/internal/wire"
)

// runAs is the account the PostgreSQL programs run as. initdb and postgres
// refuse to run as root, so a root berth hands them to the postgres
// system account.
type runAs struct {
	self   bool // the current process's own account; no switching
	name   string
	uid    uint32
	gid    uint32
	groups []uint32
}

func currentRunAs() (runAs, error) {
	if os.Geteuid() != 0 {
		return runAs{self: true, uid: uint32(os.Geteuid()), gid: uint32(os.Getegid())}, nil
	}
	u, err := user.Lookup(superuser)
	if err != nil {
		return runAs{}, wire.Errorf(wire.CodeUnavailable,
			"embedded postgres: berth runs as root but PostgreSQL refuses to, and there is no %q system account to run it as (%v): "+
				"create one (e.g. `useradd --system --home-dir /var/lib/postgresql postgres`), run berth as a normal user, or pass --database-url",
			superuser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return runAs{}, fmt.Errorf("embedded postgres: account %s has a non-numeric id: %w", u.Username, err)
	}
	if uid == 0 {
		return runAs{}, wire.Errorf(wire.CodeUnavailable,
			"embedded postgres: the %q account has uid 0, and PostgreSQL refuses to run as root: give it an unprivileged uid or pass --database-url", superuser)
	}
	as := runAs{name: u.Username, uid: uint32(uid), gid: uint32(gid)}
	gids, err := u.GroupIds()
	if err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				as.groups = append(as.groups, uint32(n))
			}
		}
	}
	return as, nil
}

// sysProcAttr switches a child to the account; nil when no switch is needed.
func (a runAs) sysProcAttr() *syscall.SysProcAttr {
	if a.self {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: a.groups}}
}

func (a runAs) String() string {
	if a.self {
		return "the current user"
	}
	return fmt.Sprintf("user %q (uid %d)", a.name, a.uid)
}

// canSearch reports whether the account may traverse a directory with the
// given ownership and mode, by the classic owner/group/other rule.
func (a runAs) canSearch(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true // cannot tell; let the programs report it
	}
	perm := fi.Mode().Perm()
	switch {
	case st.Uid == a.uid:
		return perm&0o100 != 0
	case st.Gid == a.gid || containsGID(a.groups, st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

func containsGID(gs []uint32, g uint32) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// checkReachable makes sure the account can walk down to dir. berth does
// not loosen permissions of directories it does not own (say /root), so
// the fix is left to the operator.
func (a runAs) checkReachable(dir string) error {
	if a.self {
		return nil
	}
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("embedded postgres: stat %s: %w", p, err)
		}
		if !a.canSearch(fi) {
			return wire.Errorf(wire.CodeBadRequest,
				"embedded postgres: PostgreSQL runs as %s, which cannot enter %s (mode %s), a parent of the cluster directory %s: "+
					"put berth's data directory somewhere that user can reach (e.g. --data-dir /var/lib/berth), run berth as a normal user, or pass --database-url",
				a, p, fi.Mode().Perm(), dir)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// chownTree hands dir and everything below it to the account. Entries
// already owned by it are left alone so that a large existing cluster
// costs only a walk.
func (a runAs) chownTree(dir string) error {
	if a.self {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == a.uid && st.Gid == a.gid {
			return nil
		}
		if err := os.Lchown(p, int(a.uid), int(a.gid)); err != nil {
			return fmt.Errorf("embedded postgres: hand %s to %s: %w", p, a, err)
		}
		return nil
	})
}

// chown hands one path to the account.
func (a runAs) chown(p string) error {
	if a.self {
		return nil
	}
	if err := os.Lchown(p, int(a.uid), int(a.gid)); err != nil {
		return fmt.Errorf("embedded postgres: hand %s to %s: %w", p, a, err)
	}
	return nil
}

// owns reports whether fi belongs to the account.
func (a runAs) owns(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Uid == a.uid
}
