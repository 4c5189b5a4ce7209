package fds

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeRangeCloexec is CLOSE_RANGE_CLOEXEC (Linux 5.11): mark the range
// close-on-exec instead of closing it.
const closeRangeCloexec = 1 << 2

// CloseInherited closes every descriptor from 3 up that the process
// inherited when it was executed, except those in keep, which it marks
// close-on-exec: they are this process's to use, not to pass on. Call it
// first thing in main, before the process opens anything: it tells an
// inherited descriptor by its lack of close-on-exec, which holds for every
// descriptor an exec leaves open and for none that Go opens (the runtime's
// own, which may exist before main, are spared).
//
// Without /proc it falls back to marking every descriptor from 3 up
// close-on-exec, so that nothing is passed on even though the inherited
// ones stay open in this process.
func CloseInherited(keep ...int) error {
	open, err := openDescriptors()
	if err != nil {
		if ferr := CloseOnExecFrom(3); ferr != nil {
			return fmt.Errorf("close inherited descriptors: %w", errors.Join(err, ferr))
		}
		return nil
	}
	var errs []error
	for _, fd := range open {
		if fd < 3 {
			continue
		}
		if slices.Contains(keep, fd) {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
				errs = append(errs, fmt.Errorf("descriptor %d: %w", fd, err))
			}
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			continue // the listing's own descriptor, closed since
		}
		if flags&unix.FD_CLOEXEC == 0 {
			if err := unix.Close(fd); err != nil {
				errs = append(errs, fmt.Errorf("close inherited descriptor %d: %w", fd, err))
			}
		}
	}
	return errors.Join(errs...)
}

// CloseOnExecFrom marks every descriptor from first up close-on-exec, so
// that a program the process starts next gets only the descriptors it is
// handed explicitly (os/exec's Stdin, Stdout, Stderr and ExtraFiles are
// duplicated into place without the flag). It changes no descriptor Go
// opened, which have the flag already: only inherited ones and those made
// by raw system calls.
func CloseOnExecFrom(first int) error {
	err := unix.CloseRange(uint(first), math.MaxUint32, closeRangeCloexec)
	if err == nil {
		return nil
	}
	// Kernels before 5.11: one descriptor at a time.
	open, lerr := openDescriptors()
	if lerr != nil {
		return fmt.Errorf("mark descriptors close-on-exec: %w", errors.Join(err, lerr))
	}
	for _, fd := range open {
		if fd >= first {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
	return nil
}

// openDescriptors lists the process's open descriptors, including the
// one used to list them, which is closed when it returns.
func openDescriptors() ([]int, error) {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	fds := make([]int, 0, len(names))
	for _, name := range names {
		if fd, err := strconv.Atoi(name); err == nil {
			fds = append(fds, fd)
		}
	}
	slices.Sort(fds)
	return fds, nil
}
