package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Handle is an open network namespace.
type Handle struct {
	f *os.File
}

// Open opens the network namespace at path (/proc/PID/ns/net or a file
// `ip netns add` bound under /run/netns).
func Open(path string) (*Handle, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace: %w", err)
	}
	return &Handle{f: f}, nil
}

// OpenPidfd opens the network namespace of the process a pidfd refers
// to, so that a pid reused by another process is never entered.
func OpenPidfd(pidfd int) (*Handle, error) {
	// The namespace file of a process is reached through /proc; the pidfd
	// is checked afterwards to be sure the pid still named that process
	// when the file was opened.
	pid, err := pidOf(pidfd)
	if err != nil {
		return nil, err
	}
	h, err := Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, err
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		h.Close()
		return nil, fmt.Errorf("open network namespace of pid %d: the process exited: %w", pid, err)
	}
	return h, nil
}

// Close closes the handle; sockets made in the namespace stay open.
func (h *Handle) Close() error { return h.f.Close() }

// Do runs fn on an OS thread inside the namespace. fn must not start
// goroutines that expect to be inside it.
func (h *Handle) Do(fn func() error) error {
	errc := make(chan error, 1)
	// A fresh goroutine whose thread is thrown away if it cannot be moved
	// back: no other goroutine ever runs in the wrong namespace.
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open this thread's network namespace: %w", err)
			return
		}
		defer home.Close()
		if err := unix.Setns(int(h.f.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter network namespace: %w", err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			// Left locked: the runtime ends this thread with the goroutine.
			errc <- errors.Join(ferr, fmt.Errorf("leave network namespace: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Listen is net.ListenConfig.Listen inside the namespace.
func (h *Handle) Listen(ctx context.Context, network, addr string) (net.Listener, error) {
	var l net.Listener
	err := h.Do(func() error {
		var err error
		l, err = (&net.ListenConfig{}).Listen(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s %s in the namespace: %w", network, addr, err)
	}
	return l, nil
}

// ListenPacket is net.ListenConfig.ListenPacket inside the namespace.
func (h *Handle) ListenPacket(ctx context.Context, network, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := h.Do(func() error {
		var err error
		c, err = (&net.ListenConfig{}).ListenPacket(ctx, network, addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s %s in the namespace: %w", network, addr, err)
	}
	return c, nil
}

// Dial is net.Dialer.DialContext inside the namespace: the connection is
// made from there.
func (h *Handle) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() error {
		var err error
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
