package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Listen opens addr: "fd:N" for a listening socket inherited as
// descriptor N (how berth's local runtime hands a sandboxed agent the
// socket it made, at a path the sandbox cannot see), "unix:/path/to.sock"
// for a unix socket (a stale socket file is replaced), anything else as a
// TCP host:port.
func Listen(addr string) (net.Listener, error) {
	if n, ok := strings.CutPrefix(addr, "fd:"); ok {
		return listenFD(n)
	}
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" {
			return nil, errors.New("listen: unix socket path is empty")
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("listen %s: remove stale socket: %w", addr, err)
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		if err := os.Chmod(path, 0o660); err != nil {
			ln.Close()
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", bracketIPv6(addr))
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return ln, nil
}

// bracketIPv6 accepts an IPv6 address without brackets before the port
// ("fd00::7:7070", what $(POD_IP):7070 gives on an IPv6 cluster): the
// port is whatever follows the last colon.
func bracketIPv6(addr string) string {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 || !strings.Contains(addr[:i], ":") || strings.HasPrefix(addr, "[") {
		return addr
	}
	return "[" + addr[:i] + "]" + addr[i:]
}

func listenFD(n string) (net.Listener, error) {
	fd, err := strconv.Atoi(n)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("listen fd:%s: want a descriptor number of 3 or more", n)
	}
	f := os.NewFile(uintptr(fd), "listener")
	// FileListener works on a duplicate; the original must not leak into
	// the commands the agent starts.
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("listen fd:%d: %w", fd, err)
	}
	return ln, nil
}

// Serve runs the agent on ln until ctx ends or a client asks for shutdown,
// then stops accepting requests, lets running ones finish for up to
// grace, ends every session and returns.
func (a *Agent) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{
		Handler:           a.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	runDone := make(chan error, 1)
	go func() { runDone <- a.Run(ctx) }()
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()

	a.log.Info("berth-agent listening", "addr", ln.Addr().String(), "workspace", a.cfg.Workspace)
	var serveErr error
	select {
	case <-ctx.Done():
	case <-a.ShutdownRequested():
	case serveErr = <-serveDone:
	}
	shutdownCtx, stop := context.WithTimeout(context.Background(), grace)
	defer stop()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		srv.Close()
	}
	cancel()
	runErr := <-runDone
	closeErr := a.Close()
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	a.log.Info("berth-agent stopped")
	return errors.Join(serveErr, runErr, closeErr)
}
