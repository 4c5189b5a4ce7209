package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/runtime"
)

// Bounds of the shared listeners.
const (
	// attributeWait bounds the wait for a source address's pod to reach
	// this replica's pod cache: a pod's first connection can come a
	// moment before its IP does.
	attributeWait = 5 * time.Second
	// attributeTimeout bounds all of a connection's attribution: that
	// wait and reading its server's policy for a new gateway.
	attributeTimeout = 10 * time.Second
	// maxAttributing is how many connections and DNS messages wait for
	// their attribution at once; more are closed or dropped. A known
	// sandbox's are handed over without waiting.
	maxAttributing = 256
	// maxDNSMessage is the largest DNS message read over UDP.
	maxDNSMessage = 4096
	// podIPIndex indexes the pod informers by each pod's IPs.
	podIPIndex = "podIP"
)

// errNoSandbox: a source address that is no sandbox pod's.
var errNoSandbox = errors.New("no sandbox pod has this address")

// egressFront serves the shared egress listeners: it attributes each
// connection and DNS message to a sandbox pod by its source address and
// hands it to that sandbox's gateway, made at its first connection to
// this replica and stopped when its pod goes.
type egressFront struct {
	r   *Runtime
	cfg *egressConfig
	log *slog.Logger

	proxy, dnsTCP net.Listener
	dnsUDP        net.PacketConn

	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup // the accept loops, attributions and gateways
	attributing chan struct{}
	startOnce   sync.Once
	// wait is attributeWait but in tests.
	wait time.Duration

	mu       sync.Mutex
	hooks    *runtime.EgressHooks
	gateways map[string]*podGateway // by server id
	closed   bool
}

// podGateway is the gateway of one sandbox pod.
type podGateway struct {
	uid    types.UID
	gw     *egress.Gateway
	cancel context.CancelFunc
}

// listenEgress opens the shared listeners; nothing is served until
// start.
func listenEgress(r *Runtime, cfg *egressConfig) (*egressFront, error) {
	f := &egressFront{r: r, cfg: cfg, log: r.log, attributing: make(chan struct{}, maxAttributing),
		gateways: map[string]*podGateway{}, wait: attributeWait}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	var err error
	if f.proxy, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("egress proxy listener: %w", err)
	}
	cfg.proxyPort = f.proxy.Addr().(*net.TCPAddr).Port
	if f.dnsUDP, f.dnsTCP, err = listenDNS(cfg.DNSListen); err != nil {
		f.proxy.Close()
		return nil, fmt.Errorf("egress DNS listener: %w", err)
	}
	return f, nil
}

// listenDNS listens on addr over UDP and on the same port over TCP. When
// addr lets the system pick the port, the UDP port it picked may be taken
// over TCP (by an outgoing connection's ephemeral port): then it picks
// again, a few times.
func listenDNS(addr string) (net.PacketConn, net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	tries := 1
	if port == "0" {
		tries = 20
	}
	for i := 0; ; i++ {
		udp, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		tcp, err := net.Listen("tcp", udp.LocalAddr().String())
		if err == nil {
			return udp, tcp, nil
		}
		udp.Close()
		if i+1 >= tries || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, err
		}
	}
}

// start serves the listeners with hooks (the latest given, when called
// again).
func (f *egressFront) start(h runtime.EgressHooks) {
	f.mu.Lock()
	f.hooks = &h
	f.mu.Unlock()
	f.startOnce.Do(func() {
		f.wg.Go(func() { f.accept(f.proxy, (*egress.Gateway).ServeConn) })
		f.wg.Go(func() { f.accept(f.dnsTCP, (*egress.Gateway).ServeDNSConn) })
		f.wg.Go(f.readDNS)
	})
}

// close stops serving: the listeners, every gateway and their
// connections; it returns once all have ended.
func (f *egressFront) close() {
	f.cancel()
	f.proxy.Close()
	f.dnsTCP.Close()
	f.dnsUDP.Close()
	f.mu.Lock()
	f.closed = true
	f.gateways = map[string]*podGateway{}
	f.mu.Unlock()
	f.wg.Wait()
}

// accept hands each connection on l to its sandbox's gateway.
func (f *egressFront) accept(l net.Listener, hand func(*egress.Gateway, net.Conn)) {
	failures := 0
	for {
		c, err := l.Accept()
		if err != nil {
			if f.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors and the like: wait, as net/http does.
			failures++
			f.log.Warn("egress accept failed", "listener", l.Addr().String(), "err", err)
			if !sleep(f.ctx, min(time.Duration(failures)*5*time.Millisecond, time.Second)) {
				return
			}
			continue
		}
		failures = 0
		src := sourceOf(c.RemoteAddr())
		if gw := f.known(src); gw != nil {
			hand(gw, c)
			continue
		}
		f.attribute(src, func(gw *egress.Gateway) {
			if gw == nil {
				c.Close()
				return
			}
			hand(gw, c)
		})
	}
}

// readDNS answers each DNS message over UDP by its sandbox's gateway; a
// message from a source that is no sandbox gets no answer.
func (f *egressFront) readDNS() {
	buf := make([]byte, maxDNSMessage)
	failures := 0
	for {
		n, from, err := f.dnsUDP.ReadFrom(buf)
		if err != nil {
			if f.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			failures++
			if !sleep(f.ctx, min(time.Duration(failures)*5*time.Millisecond, time.Second)) {
				return
			}
			continue
		}
		failures = 0
		reply := func(resp []byte) { f.dnsUDP.WriteTo(resp, from) }
		src := sourceOf(from)
		if gw := f.known(src); gw != nil {
			gw.AnswerDNS(buf[:n], reply)
			continue
		}
		msg := append([]byte(nil), buf[:n]...)
		f.attribute(src, func(gw *egress.Gateway) {
			if gw != nil {
				gw.AnswerDNS(msg, reply)
			}
		})
	}
}

// known returns the running gateway of the sandbox pod at src, or nil
// when there is none yet (or src is no sandbox's).
func (f *egressFront) known(src netip.Addr) *egress.Gateway {
	p, err := f.podAt(src)
	if err != nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if pg := f.gateways[p.Name]; pg != nil && pg.uid == p.UID {
		return pg.gw
	}
	return nil
}

// attribute finds the gateway of the sandbox pod at src, waiting a
// moment for the pod cache and making the gateway if need be, and
// calls then with it, or with nil when src is no sandbox's. It runs
// away from the accept loop, at most maxAttributing at once; past that
// then gets nil at once.
func (f *egressFront) attribute(src netip.Addr, then func(*egress.Gateway)) {
	select {
	case f.attributing <- struct{}{}:
	default:
		then(nil)
		return
	}
	f.wg.Go(func() {
		defer func() { <-f.attributing }()
		ctx, cancel := context.WithTimeout(f.ctx, attributeTimeout)
		defer cancel()
		gw, err := f.gatewayAt(ctx, src)
		if err != nil {
			f.log.Debug("egress from an address that is no sandbox's refused", "source", src.String(), "err", err)
			then(nil)
			return
		}
		then(gw)
	})
}

// gatewayAt waits up to f.wait for the sandbox pod at src and
// returns its gateway, made if need be.
func (f *egressFront) gatewayAt(ctx context.Context, src netip.Addr) (*egress.Gateway, error) {
	wait, cancel := context.WithTimeout(ctx, f.wait)
	defer cancel()
	for {
		changed := f.r.changes.next()
		p, err := f.podAt(src)
		if err == nil {
			return f.gatewayFor(ctx, p)
		}
		if !errors.Is(err, errNoSandbox) {
			return nil, err
		}
		select {
		case <-wait.Done():
			return nil, err
		case <-changed:
		}
	}
}

// gatewayFor returns the running gateway of sandbox pod p, starting
// one if need be: a pod replaced under the same name (a restarted
// server) gets a new one.
func (f *egressFront) gatewayFor(ctx context.Context, p *corev1.Pod) (*egress.Gateway, error) {
	id := p.Name
	f.mu.Lock()
	if pg := f.gateways[id]; pg != nil && pg.uid == p.UID {
		f.mu.Unlock()
		return pg.gw, nil
	}
	hooks := f.hooks
	f.mu.Unlock()
	if hooks == nil {
		return nil, errors.New("egress is not carried yet")
	}
	_, used, err := hooks.Server(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s egress: %w", id, err)
	}
	h := *hooks
	gw := egress.NewGateway(egress.Config{
		Guard:    f.cfg.Guard,
		Resolver: f.cfg.Resolver,
		Policy: func(ctx context.Context) (egress.Policy, error) {
			p, _, err := h.Server(ctx, id)
			return p, err
		},
		Refused:   func(r egress.Refusal) { h.Refused(id, r) },
		Allowed:   func() { h.Allowed(id) },
		Limits:    f.cfg.Limits,
		UsedBytes: used,
		Logger:    f.log.With("server_id", id),
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errors.New("egress is closed")
	}
	old := f.gateways[id]
	if old != nil && old.uid == p.UID {
		// Another connection of the pod made it first; ours never ran.
		return old.gw, nil
	}
	if old != nil {
		old.cancel()
	}
	gctx, cancel := context.WithCancel(f.ctx)
	if err := gw.Start(gctx); err != nil {
		cancel()
		return nil, err
	}
	f.gateways[id] = &podGateway{uid: p.UID, gw: gw, cancel: cancel}
	f.wg.Go(func() {
		h.RecordBytes(gctx, id, gw.Bytes, used, f.log)
		<-gw.Done()
	})
	return gw, nil
}

// podGone stops the gateway of a pod that was deleted.
func (f *egressFront) podGone(id string, uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pg := f.gateways[id]; pg != nil && pg.uid == uid {
		pg.cancel()
		delete(f.gateways, id)
	}
}

// podAt is the one sandbox pod that may be sending from src: not being
// deleted, not ended, not on the node's own network. Two such pods with
// one address (a cache that has not caught up with a reused IP) are
// refused rather than guessed between.
func (f *egressFront) podAt(src netip.Addr) (*corev1.Pod, error) {
	if !src.IsValid() {
		return nil, errNoSandbox
	}
	var found *corev1.Pod
	for _, idx := range f.r.indexers {
		objs, err := idx.ByIndex(podIPIndex, src.String())
		if err != nil {
			return nil, fmt.Errorf("pods at %s: %w", src, err)
		}
		for _, o := range objs {
			p, ok := o.(*corev1.Pod)
			if !ok || p.DeletionTimestamp != nil || p.Spec.HostNetwork ||
				p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			if found != nil {
				return nil, fmt.Errorf("sandbox pods %s and %s both have address %s", found.Name, p.Name, src)
			}
			found = p
		}
	}
	if found == nil {
		return nil, errNoSandbox
	}
	return found, nil
}

// podIPs indexes a pod by its addresses.
func podIPs(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, ip := range p.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			out = append(out, a.Unmap().String())
		}
	}
	if len(out) == 0 && p.Status.PodIP != "" {
		if a, err := netip.ParseAddr(p.Status.PodIP); err == nil {
			out = append(out, a.Unmap().String())
		}
	}
	return out, nil
}

var _ cache.IndexFunc = podIPs

// sourceOf is a connection's or packet's source address.
func sourceOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// sleep waits d, or returns false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
