package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// kernelTunables are the kernel settings a kubelet sets on its host as
// it starts (vm.overcommit_memory=1, kernel.panic=10,
// kernel.panic_on_oops=1, ...) unless told to fail instead
// (protectKernelDefaults, which fails on any machine not set up for
// Kubernetes). The machines berth is tested on are shared: a test must
// not leave them panicking on an oops, so kubetest puts back what the
// kubelet changed as soon as it has started (it does not look again).
var kernelTunables = []string{
	"/proc/sys/vm/overcommit_memory",
	"/proc/sys/vm/panic_on_oom",
	"/proc/sys/kernel/panic",
	"/proc/sys/kernel/panic_on_oops",
	"/proc/sys/kernel/keys/root_maxkeys",
	"/proc/sys/kernel/keys/root_maxbytes",
}

// tunablesLock serialises kubelet starts on the host: two nodes starting
// at once would each save the other's changes as the host's settings.
var tunablesLock = filepath.Join(os.TempDir(), "kubetest-kernel-tunables.lock")

// holdKernelTunables takes the host-wide lock, saves the settings (in
// dir, where the node's sweeper finds them should the test binary die)
// and returns the function that puts them back and lets go of the lock.
func holdKernelTunables(ctx context.Context, dir string) (restore func(), err error) {
	lock, err := os.OpenFile(tunablesLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("kernel settings lock: %w", err)
	}
	for {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK {
			lock.Close()
			return nil, fmt.Errorf("kernel settings lock: %w", err)
		}
		select {
		case <-ctx.Done():
			lock.Close()
			return nil, fmt.Errorf("kernel settings lock %s: another kubelet is starting: %w", tunablesLock, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	saved := map[string]string{}
	var b strings.Builder
	for _, p := range kernelTunables {
		v, err := os.ReadFile(p)
		if err != nil {
			continue // not in this kernel
		}
		saved[p] = strings.TrimSpace(string(v))
		fmt.Fprintf(&b, "%s %s\n", p, saved[p])
	}
	savedFile := filepath.Join(dir, "kernel-tunables.saved")
	if err := os.WriteFile(savedFile, []byte(b.String()), 0o600); err != nil {
		lock.Close()
		return nil, fmt.Errorf("save kernel settings: %w", err)
	}
	return func() {
		for p, was := range saved {
			if now, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(now)) != was {
				_ = os.WriteFile(p, []byte(was+"\n"), 0o644)
			}
		}
		os.Remove(savedFile)
		lock.Close() // lets go of the lock
	}, nil
}
