package egresstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Client is a network namespace linked straight to an Internet, whose
// /etc/resolv.conf (for the programs it runs) names the internet's DNS:
// real programs (pip, git, npm, curl) run there unchanged and reach the
// test hosts by name. It reaches nothing else: not the host, not the real
// network.
type Client struct {
	// Namespace is the client's network namespace (/run/netns/NAME).
	Namespace string
	inet      *Internet
}

// Client makes a client namespace that lives until t ends.
func (i *Internet) Client(t testing.TB) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := i.newClient(ctx)
	if err != nil {
		t.Fatalf("egresstest: make a client namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := i.removeClient(ctx, c.Namespace); err != nil {
			t.Errorf("egresstest: remove client namespace: %v", err)
		}
	})
	return c
}

func (i *Internet) newClient(ctx context.Context) (*Client, error) {
	i.mu.Lock()
	if i.nextClient >= maxClients {
		i.mu.Unlock()
		return nil, fmt.Errorf("this internet already made %d clients, all it has addresses for", maxClients)
	}
	i.nextClient++
	k := i.nextClient
	name := clientNSPrefix(i.Slot) + randomSuffix()
	i.clients[name] = true
	i.mu.Unlock()

	// The resolv.conf is in place before the namespace exists, so that
	// a crash between the two leaves nothing the sweep cannot find.
	dir := etcNetnsDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make %s: %w", dir, err)
	}
	conf := fmt.Sprintf("nameserver %s\noptions timeout:2 attempts:3\n", i.Hosts["ns.test"])
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("write resolv.conf: %w", err)
	}
	if err := ipCmd(ctx, "netns", "add", name); err != nil {
		return nil, err
	}
	inet, client, inet6, client6 := i.clientLink(k)
	link := fmt.Sprintf("client%d", k)
	if err := ipCmd(ctx, "-n", i.Namespace, "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", name); err != nil {
		return nil, err
	}
	if err := ipBatch(ctx, i.Namespace, []string{
		fmt.Sprintf("addr add %s/30 dev %s", inet, link),
		fmt.Sprintf("addr add %s/64 dev %s nodad", inet6, link),
		fmt.Sprintf("link set %s up", link),
	}); err != nil {
		return nil, err
	}
	if err := ipBatch(ctx, name, []string{
		"link set lo up",
		fmt.Sprintf("addr add %s/30 dev eth0", client),
		fmt.Sprintf("addr add %s/64 dev eth0 nodad", client6),
		"link set eth0 up",
		fmt.Sprintf("route add %s via %s dev eth0", i.Prefix, inet),
		fmt.Sprintf("route add %s via %s dev eth0", i.Prefix6, inet6),
	}); err != nil {
		return nil, err
	}
	return &Client{Namespace: name, inet: i}, nil
}

// removeClient removes a client's namespace (its link to the internet goes
// with it) and its resolv.conf.
func (i *Internet) removeClient(ctx context.Context, name string) error {
	i.mu.Lock()
	known := i.clients[name]
	delete(i.clients, name)
	i.mu.Unlock()
	if !known {
		return nil // already removed with its internet
	}
	var errs []error
	if _, err := os.Stat("/run/netns/" + name); err == nil {
		if err := ipCmd(ctx, "netns", "del", name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(etcNetnsDir(name)); err != nil {
		errs = append(errs, fmt.Errorf("remove %s: %w", etcNetnsDir(name), err))
	}
	return errors.Join(errs...)
}

// removeClients removes the clients that outlived their internet (made
// with a longer-lived test than it).
func (i *Internet) removeClients(ctx context.Context) error {
	i.mu.Lock()
	names := make([]string, 0, len(i.clients))
	for name := range i.clients {
		names = append(names, name)
	}
	i.mu.Unlock()
	var errs []error
	for _, name := range names {
		errs = append(errs, i.removeClient(ctx, name))
	}
	return errors.Join(errs...)
}

// Command returns a command that runs name with args in the client's
// namespace, with the environment of the test plus Env (the test CA
// trusted), less any proxy settings (no proxy is reachable from there).
func (c *Client) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.Namespace, name}, args...)...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "http_proxy", "https_proxy", "all_proxy", "no_proxy":
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, c.inet.Env()...)
	return cmd
}

// Run runs a command in the client's namespace and returns what it wrote
// to stdout and stderr; the error says how it failed and quotes that.
func (c *Client) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := c.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), c.Namespace, err, bytes.TrimSpace(tail(out, 4000)))
	}
	return out, nil
}

// tail returns the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
