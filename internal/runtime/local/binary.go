//go:build linux

package local

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// sealedCopy copies the agent binary into a sealed memfd. Confined
// sandboxes are executed from it through /proc/self/fd, so the binary
// needs no path a sandbox's uid can reach, and /proc/<pid>/exe inside a
// sandbox names a file nobody can change (an exec'd file on disk that its
// owner could rewrite would change every later sandbox).
func sealedCopy(path string) (*os.File, error) {
	src, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("agent binary: %w", err)
	}
	defer src.Close()
	fd, err := unix.MemfdCreate("berth-agent", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("agent binary: memfd: %w", err)
	}
	f := os.NewFile(uintptr(fd), "berth-agent")
	if _, err := io.Copy(f, src); err != nil {
		f.Close()
		return nil, fmt.Errorf("agent binary: copy: %w", err)
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, seals); err != nil {
		f.Close()
		return nil, fmt.Errorf("agent binary: seal: %w", err)
	}
	if err := unix.Fchmod(fd, 0o555); err != nil {
		f.Close()
		return nil, fmt.Errorf("agent binary: %w", err)
	}
	return f, nil
}
