package sandbox

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
)

// giveWorkspace makes /workspace (the directory, not what is in it) the
// user's: an image's USER as the image names it. It runs after the root
// is the image's, so names resolve in the image's /etc/passwd and
// /etc/group, which are the sandbox's own to read.
func giveWorkspace(spec string) error {
	name, group, hasGroup := strings.Cut(spec, ":")
	uid, gid, err := lookupIDs(name)
	if err != nil {
		return err
	}
	if hasGroup {
		if gid, err = lookupGroup(group); err != nil {
			return err
		}
	}
	if err := os.Lchown(WorkspaceDir, uid, gid); err != nil {
		return fmt.Errorf("give the workspace to %s: %w", spec, err)
	}
	return nil
}

// lookupIDs is a user's uid and primary gid; a number the passwd file
// does not know is a uid with group 0, as container runtimes take it.
func lookupIDs(name string) (int, int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if u, err = user.LookupId(name); err != nil {
			if n, nerr := strconv.Atoi(name); nerr == nil && n >= 0 {
				return n, 0, nil
			}
			return 0, 0, fmt.Errorf("user %q: %w", name, err)
		}
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return 0, 0, fmt.Errorf("user %q has uid %q", name, u.Uid)
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return 0, 0, fmt.Errorf("user %q has gid %q", name, u.Gid)
	}
	return uid, gid, nil
}

func lookupGroup(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil && n >= 0 {
		return n, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("group %q: %w", name, err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, fmt.Errorf("group %q has gid %q", name, g.Gid)
	}
	return gid, nil
}
