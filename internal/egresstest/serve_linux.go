package egresstest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
)

// serve makes what the hosts serve and starts their servers.
func (i *Internet) serve(ctx context.Context) error {
	var names []string
	var ips []netip.Addr
	for _, h := range hostOffsets {
		names = append(names, h.name)
		ips = append(ips, i.Hosts[h.name], i.Hosts6[h.name])
		i.zone.set(h.name, i.Hosts[h.name], i.Hosts6[h.name])
	}
	// Names whose addresses berth's gateway must refuse to dial.
	i.zone.set("rebind.test", netip.MustParseAddr("127.0.0.1"))
	i.zone.set("private.test", netip.MustParseAddr("10.0.0.5"))
	i.zone.set("meta.test", netip.MustParseAddr("169.254.169.254"))
	i.zone.setWild("wild.test", i.Hosts["files.test"], i.Hosts6["files.test"])
	names = append(names, "*.wild.test")

	ca, err := newAuthority(names, ips)
	if err != nil {
		return err
	}
	i.ca = ca
	i.CAFile = filepath.Join(i.dir, "ca.pem")
	i.CABundleFile = filepath.Join(i.dir, "ca-bundle.pem")
	if i.CABundle, err = ca.bundle(); err != nil {
		return err
	}
	if err := os.WriteFile(i.CAFile, ca.caPEM, 0o644); err != nil {
		return fmt.Errorf("write the CA: %w", err)
	}
	if err := os.WriteFile(i.CABundleFile, i.CABundle, 0o644); err != nil {
		return fmt.Errorf("write the CA bundle: %w", err)
	}

	if err := i.serveDNS(ctx); err != nil {
		return err
	}
	pypi, err := newPyPI()
	if err != nil {
		return err
	}
	npm, err := newNPM()
	if err != nil {
		return err
	}
	git, err := i.gitHost(ctx)
	if err != nil {
		return err
	}
	return i.serveWeb(ctx, map[string]http.Handler{
		"files.test": filesHandler(),
		"tls.test":   filesHandler(),
		"pypi.test":  pypi,
		"git.test":   git,
		"npm.test":   npm,
	})
}

// gitHost returns what git.test serves: demo.git, or, on a machine
// without git, an answer that says so (the tests that clone skip there).
func (i *Internet) gitHost(ctx context.Context) (http.Handler, error) {
	if _, err := exec.LookPath("git"); err != nil {
		i.logf("git.test serves no repository: %v", err)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "git is not installed on the machine running the test", http.StatusServiceUnavailable)
		}), nil
	}
	root := filepath.Join(i.dir, "git")
	if err := makeGitRepo(ctx, root); err != nil {
		return nil, err
	}
	return gitHandler(ctx, root, logWriter{i})
}

// goServe runs fn on a goroutine the Internet owns: stopServers waits for
// it, after calling every stop function (stop, if not nil, or another
// one, must make fn return).
func (i *Internet) goServe(fn func(), stop func(ctx context.Context) error) {
	if stop != nil {
		i.stops = append(i.stops, stop)
	}
	i.wg.Add(1)
	go func() {
		defer i.wg.Done()
		fn()
	}()
}

// stopServers stops every server and waits for their goroutines.
func (i *Internet) stopServers(ctx context.Context) error {
	var errs []error
	for _, stop := range i.stops {
		if err := stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	done := make(chan struct{})
	go func() {
		i.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("wait for the servers to stop: %w", ctx.Err()))
	}
	return errors.Join(errs...)
}

// listen makes a listener inside the namespace.
func (i *Internet) listen(ctx context.Context, network, addr string) (net.Listener, error) {
	return i.ns.Listen(ctx, network, addr)
}
