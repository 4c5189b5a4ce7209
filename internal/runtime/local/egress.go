//go:build linux

package local

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/netns"
	"github.com/berth-mcp/berth/internal/runtime"
)

// A confined sandbox's network namespace has only its loopback: no route
// leads out, so a program that ignores the proxy settings fails at once
// (ENETUNREACH). berth opens the egress gateway's listeners on that
// loopback (the proxy and a DNS resolver) and serves them from its own
// process: every outbound connection is dialled by berth, from the
// host's namespace, after the server's policy allowed it. Nothing in the
// sandbox can change that path: the sandbox holds no socket outside its
// namespace and no route to one.

// Where the gateway listens inside every sandbox.
const (
	egressAddr = "127.0.0.1"
	proxyPort  = 3128
	dnsPort    = 53
)

// proxyEnv points the programs of a sandbox at its gateway.
func proxyEnv() map[string]string {
	return egress.ProxyEnv(net.JoinHostPort(egressAddr, strconv.Itoa(proxyPort)))
}

// resolvConfText is the sandbox's resolver: the gateway's, on its
// loopback.
const resolvConfText = "# berth: the sandbox's egress resolver answers by its server's network policy\nnameserver " + egressAddr + "\noptions timeout:2 attempts:2\n"

// egressHost runs the gateways of this runtime's sandboxes.
type egressHost struct {
	r    *Runtime
	opts EgressOptions

	mu      sync.Mutex
	hooks   *runtime.EgressHooks
	running map[string]*egressRun
}

// egressRun is one sandbox's gateway.
type egressRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

var _ runtime.EgressCarrier = (*Runtime)(nil)

// CarryEgress implements runtime.EgressCarrier: the gateways of the
// sandboxes already running (adopted from an earlier berth) start now,
// those of new ones as each becomes ready.
// Without full isolation it says false: the orchestrator then refuses
// network policies rather than record one nothing enforces.
func (r *Runtime) CarryEgress(h runtime.EgressHooks) bool {
	if r.egress == nil {
		// Unconfined sandboxes share the host's network: no policy can
		// be enforced, so none is accepted.
		return false
	}
	r.egress.mu.Lock()
	r.egress.hooks = &h
	r.egress.mu.Unlock()
	r.mu.Lock()
	var live []*proc
	for _, p := range r.procs {
		if !p.exited() {
			live = append(live, p)
		}
	}
	r.mu.Unlock()
	for _, p := range live {
		if err := r.egress.serve(p); err != nil {
			r.log.Warn("sandbox egress", "server_id", p.id, "err", err)
		}
	}
	return true
}

// serve starts p's gateway unless it runs. The sandbox's loopback must
// be up: its agent answered.
func (e *egressHost) serve(p *proc) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hooks == nil || e.running[p.id] != nil {
		return nil
	}
	hooks := *e.hooks
	id := p.id
	ctx, cancel := context.WithCancel(context.Background())
	_, used, err := hooks.Server(ctx, id)
	if err != nil {
		cancel()
		return fmt.Errorf("sandbox %s egress: %w", id, err)
	}
	proxy, dnsUDP, dnsTCP, err := listenInSandbox(ctx, p)
	if err != nil {
		cancel()
		return fmt.Errorf("sandbox %s egress: %w", id, err)
	}
	gw := egress.NewGateway(egress.Config{
		Guard:    e.opts.Guard,
		Resolver: e.opts.Resolver,
		Policy: func(ctx context.Context) (egress.Policy, error) {
			p, _, err := hooks.Server(ctx, id)
			return p, err
		},
		Refused:   func(r egress.Refusal) { hooks.Refused(id, r) },
		Allowed:   func() { hooks.Allowed(id) },
		Limits:    e.opts.Limits,
		UsedBytes: used,
		Logger:    e.r.log.With("server_id", id),
	})
	run := &egressRun{cancel: cancel, done: make(chan struct{})}
	e.running[id] = run
	go func() {
		defer close(run.done)
		var wg sync.WaitGroup
		wg.Go(func() { hooks.RecordBytes(ctx, id, gw.Bytes, used, e.r.log) })
		if err := gw.Serve(ctx, proxy, dnsUDP, dnsTCP); err != nil && ctx.Err() == nil {
			e.r.log.Warn("sandbox egress gateway stopped", "server_id", id, "err", err)
		}
		cancel()
		wg.Wait()
	}()
	return nil
}

// stop ends id's gateway, if it runs, and waits for it.
func (e *egressHost) stop(id string) {
	e.mu.Lock()
	run := e.running[id]
	delete(e.running, id)
	e.mu.Unlock()
	if run != nil {
		run.cancel()
		<-run.done
	}
}

// stopAll ends every gateway (the runtime closes; the sandboxes live on,
// and the next berth serves them again).
func (e *egressHost) stopAll() {
	e.mu.Lock()
	ids := make([]string, 0, len(e.running))
	for id := range e.running {
		ids = append(ids, id)
	}
	e.mu.Unlock()
	for _, id := range ids {
		e.stop(id)
	}
}

// listenInSandbox opens the gateway's listeners on p's loopback.
func listenInSandbox(ctx context.Context, p *proc) (net.Listener, net.PacketConn, net.Listener, error) {
	pidfd, err := unix.PidfdOpen(p.Pid, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("pidfd of pid %d: %w", p.Pid, err)
	}
	defer unix.Close(pidfd)
	// Checked after opening: the pidfd then pins the process checked.
	if !p.ID.Running() {
		return nil, nil, nil, fmt.Errorf("the sandbox's init (pid %d) is gone", p.Pid)
	}
	h, err := netns.OpenPidfd(pidfd)
	if err != nil {
		return nil, nil, nil, err
	}
	defer h.Close()
	proxy, err := h.Listen(ctx, "tcp", net.JoinHostPort(egressAddr, strconv.Itoa(proxyPort)))
	if err != nil {
		return nil, nil, nil, err
	}
	dnsUDP, err := h.ListenPacket(ctx, "udp", net.JoinHostPort(egressAddr, strconv.Itoa(dnsPort)))
	if err != nil {
		proxy.Close()
		return nil, nil, nil, err
	}
	dnsTCP, err := h.Listen(ctx, "tcp", net.JoinHostPort(egressAddr, strconv.Itoa(dnsPort)))
	if err != nil {
		proxy.Close()
		dnsUDP.Close()
		return nil, nil, nil, err
	}
	return proxy, dnsUDP, dnsTCP, nil
}

// withProxyEnv adds the proxy settings to a confined sandbox's
// environment; the image's and the caller's own win.
func (r *Runtime) withProxyEnv(env map[string]string) map[string]string {
	if r.egress == nil {
		return env
	}
	out := proxyEnv()
	for k, v := range env {
		out[k] = v
	}
	return out
}
