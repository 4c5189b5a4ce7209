package sandbox

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// DefaultCaps is the bounding set a sandbox's root keeps: the set
// container runtimes (Docker, containerd) give by default. It lets root
// inside own files, switch users and bind low ports, and withholds what
// reaches kernel surface beyond that: mounts, namespaces, ptrace, raw
// I/O, modules, BPF, the clock.
var DefaultCaps = []uint{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FSETID, unix.CAP_FOWNER, unix.CAP_MKNOD,
	unix.CAP_NET_RAW, unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETFCAP, unix.CAP_SETPCAP,
	unix.CAP_NET_BIND_SERVICE, unix.CAP_SYS_CHROOT, unix.CAP_KILL, unix.CAP_AUDIT_WRITE,
}

// dropPrivileges shrinks the calling thread's bounding set to keep and
// sets no_new_privs, so that the agent forked from this thread, and
// everything it starts, can never gain a capability outside keep, through
// setuid or file capabilities alike.
func dropPrivileges(keep []uint) error {
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := uint(0); c <= last; c++ {
		if slices.Contains(keep, c) {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	return nil
}

// lastCap is the highest capability this kernel knows.
func lastCap() (uint, error) {
	for c := uint(unix.CAP_LAST_CAP + 8); ; c-- {
		if _, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil {
			return c, nil
		}
		if c == 0 {
			return 0, fmt.Errorf("read the capability bounding set")
		}
	}
}
