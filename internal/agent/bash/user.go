package bash

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/berth-mcp/berth/internal/wire"
)

// credential is the identity a command runs as when it differs from the
// agent's own.
type credential struct {
	name string
	home string
	sys  *syscall.Credential
}

// lookupCredential resolves the request's user. It returns nil when the
// command should run as the agent itself. euid is passed in so that the
// non-root rules can be exercised by tests running as root.
func lookupCredential(name string, euid int) (*credential, error) {
	if name == "" {
		return nil, nil
	}
	if euid != 0 {
		if self, err := user.Current(); err == nil && (name == self.Username || name == self.Uid) {
			return nil, nil
		}
		return nil, wire.Errorf(wire.CodeBadRequest, "user %q: user switching needs the agent to run as root", name)
	}
	u, err := user.Lookup(name)
	if err != nil {
		var unknown user.UnknownUserError
		if !errors.As(err, &unknown) {
			return nil, fmt.Errorf("look up user %q: %w", name, err)
		}
		// A numeric name may be a uid without a passwd entry's name.
		if _, numErr := strconv.ParseUint(name, 10, 32); numErr != nil {
			return nil, wire.Errorf(wire.CodeBadRequest, "user %q does not exist", name)
		}
		if u, err = user.LookupId(name); err != nil {
			return nil, wire.Errorf(wire.CodeBadRequest, "user %q does not exist", name)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q has a non-numeric uid %q", name, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %q has a non-numeric gid %q", name, u.Gid)
	}
	for _, m := range []struct {
		kind, file string
		id         uint64
	}{{"uid", "/proc/self/uid_map", uid}, {"gid", "/proc/self/gid_map", gid}} {
		if !idMapped(m.file, m.id) {
			return nil, wire.Errorf(wire.CodeBadRequest, "user %q has %s %d, which this sandbox's user namespace does not map (see %s)", name, m.kind, m.id, m.file)
		}
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("list groups of user %q: %w", name, err)
	}
	groups := make([]uint32, 0, len(ids))
	for _, id := range ids {
		g, err := strconv.ParseUint(id, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("user %q has a non-numeric group id %q", name, id)
		}
		groups = append(groups, uint32(g))
	}
	return &credential{
		name: u.Username,
		home: u.HomeDir,
		sys:  &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups},
	}, nil
}

// lookupImageUser resolves the default user of commands as an image's
// USER names it: name, uid, name:group or uid:gid. A uid the passwd file
// does not know is taken as it is, with group 0 unless one is given, as
// container runtimes take it.
func lookupImageUser(spec string, euid int) (*credential, error) {
	name, group, hasGroup := strings.Cut(spec, ":")
	cred, err := lookupCredential(name, euid)
	if err != nil {
		uid, numErr := strconv.ParseUint(name, 10, 32)
		if numErr != nil || euid != 0 || !idMapped("/proc/self/uid_map", uid) {
			return nil, fmt.Errorf("the image's user %q: %w", spec, err)
		}
		cred = &credential{name: name, home: "/", sys: &syscall.Credential{Uid: uint32(uid)}}
	}
	if cred == nil || !hasGroup {
		return cred, nil
	}
	gid, err := strconv.ParseUint(group, 10, 32)
	if err != nil {
		g, lerr := user.LookupGroup(group)
		if lerr != nil {
			return nil, wire.Errorf(wire.CodeBadRequest, "the image's user %q: group %q does not exist", spec, group)
		}
		if gid, err = strconv.ParseUint(g.Gid, 10, 32); err != nil {
			return nil, fmt.Errorf("group %q has a non-numeric gid %q", group, g.Gid)
		}
	}
	if !idMapped("/proc/self/gid_map", gid) {
		return nil, wire.Errorf(wire.CodeBadRequest, "the image's user %q has gid %d, which this sandbox's user namespace does not map", spec, gid)
	}
	cred.sys.Gid, cred.sys.Groups = uint32(gid), nil
	return cred, nil
}

// idMapped reports whether id is mapped by the user namespace map file
// (lines "inside outside count"). Without the file (not Linux) every id
// counts as mapped.
func idMapped(file string, id uint64) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return true
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		inside, err1 := strconv.ParseUint(f[0], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 33)
		if err1 == nil && err2 == nil && id >= inside && id < inside+count {
			return true
		}
	}
	return false
}
