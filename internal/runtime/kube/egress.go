package kube

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/runtime"
)

// On Kubernetes a sandbox pod has a network of its own, which berth
// cannot confine from inside the pod. berth serves one egress proxy and
// one DNS server for all sandbox pods, and the sandbox namespace's
// NetworkPolicy (the cluster's, see deploy/ and docs/deploy.md) lets
// sandbox pods reach only them. Each connection and DNS message is
// attributed to its sandbox by its source address, the pod's IP, and
// decided by that server's policy by its own gateway, exactly as on the
// local runtime; a source that is no sandbox pod gets nothing.

// EgressOptions configure the egress gateway of sandbox pods.
type EgressOptions struct {
	// Listen is where berth serves the sandboxes' HTTP and SOCKS5 proxy,
	// host:port ("10.88.0.1:3128", or ":3128" behind a Service; port 0
	// lets the system pick one). Empty:
	// no gateway; the orchestrator then refuses network policies, and a
	// sandbox's network is what the namespace's NetworkPolicies allow.
	Listen string
	// DNSListen is where berth answers the sandboxes' DNS questions,
	// over UDP and TCP (":5353" behind a Service's port 53, or
	// "10.88.0.1:53").
	DNSListen string
	// Address is the IP address sandbox pods reach the gateway at: the
	// proxy on Listen's port and DNS on port 53 (a resolv.conf cannot
	// name another). Default: Listen's host, which must then be an
	// address.
	Address string
	// Guard is the address rule every connection passes, whatever the
	// server's policy: nil refuses everything that is not public.
	Guard *egress.Guard
	// Resolver resolves names for the gateway (nil: berth's own).
	Resolver *net.Resolver
	// Limits bound each sandbox's egress, on each berth replica.
	Limits egress.Limits
}

// egressConfig is what the pods are told, worked out from EgressOptions.
type egressConfig struct {
	EgressOptions
	address   netip.Addr
	proxyPort int
}

// checkEgress validates o; nil when no gateway is configured.
func checkEgress(o EgressOptions) (*egressConfig, error) {
	if o.Listen == "" {
		if o.DNSListen != "" || o.Address != "" {
			return nil, errors.New("egress: a DNS listener or address without a proxy listener (--kube-egress-listen)")
		}
		return nil, nil
	}
	if o.DNSListen == "" {
		return nil, errors.New("egress: a proxy listener without a DNS listener (--kube-egress-dns-listen): sandboxes resolve names through berth")
	}
	host, port, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("egress listener %q: want host:port: %w", o.Listen, err)
	}
	c := &egressConfig{EgressOptions: o}
	// Port 0: the system picks, and pods are told the port it picked.
	if c.proxyPort, err = strconv.Atoi(port); err != nil || c.proxyPort < 0 || c.proxyPort > 65535 {
		return nil, fmt.Errorf("egress listener %q: want a port from 0 to 65535", o.Listen)
	}
	if _, _, err := net.SplitHostPort(o.DNSListen); err != nil {
		return nil, fmt.Errorf("egress DNS listener %q: want host:port: %w", o.DNSListen, err)
	}
	addr := o.Address
	if addr == "" {
		addr = host
	}
	if c.address, err = netip.ParseAddr(addr); err != nil || c.address.IsUnspecified() {
		return nil, fmt.Errorf("egress address %q: want the IP address sandbox pods reach berth's egress listeners at (--kube-egress-address, e.g. the cluster IP of its Service)", addr)
	}
	c.address = c.address.Unmap()
	return c, nil
}

// proxyEnv points a sandbox's programs at the gateway.
func (c *egressConfig) proxyEnv() map[string]string {
	return egress.ProxyEnv(net.JoinHostPort(c.address.String(), strconv.Itoa(c.proxyPort)))
}

// withEgress gives a sandbox pod the gateway: the proxy settings (the
// caller's own win) and berth's DNS as its only resolver.
func (r *Runtime) withEgress(pod *corev1.Pod, spec runtime.Spec) {
	c := r.egressCfg
	if c == nil {
		return
	}
	env := c.proxyEnv()
	for _, k := range sortedKeys(env) {
		if _, mine := spec.Env[k]; !mine {
			pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, corev1.EnvVar{Name: k, Value: env[k]})
		}
	}
	timeout, attempts := "2", "2"
	pod.Spec.DNSPolicy = corev1.DNSNone
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{
		Nameservers: []string{c.address.String()},
		Options:     []corev1.PodDNSConfigOption{{Name: "timeout", Value: &timeout}, {Name: "attempts", Value: &attempts}},
	}
}

var _ runtime.EgressCarrier = (*Runtime)(nil)

// CarryEgress implements runtime.EgressCarrier: the shared listeners
// serve from now on. Without an egress listener it says false, and the
// orchestrator refuses network policies.
func (r *Runtime) CarryEgress(h runtime.EgressHooks) bool {
	if r.front == nil {
		return false
	}
	r.front.start(h)
	return true
}

// EgressProxy is the address and port sandbox pods reach the egress
// proxy at; their DNS is port 53 of the same address. It says false
// without a gateway.
func (r *Runtime) EgressProxy() (netip.AddrPort, bool) {
	if r.egressCfg == nil {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(r.egressCfg.address, uint16(r.egressCfg.proxyPort)), true
}
