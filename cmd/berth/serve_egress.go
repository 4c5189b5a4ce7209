package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/runtime/local"
)

// egressFlags configure what sandboxes may reach on the network.
type egressFlags struct {
	defaultPolicy string
	ceiling       string
	reachable     []string
	dns           string
	bandwidth     string
	connections   int
	bytes         string
}

func (f *egressFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.defaultPolicy, "egress-default", "", `network policy of a server started without one: none, public, or allowlist:ENTRY,... (domain names such as pypi.org or *.github.com, addresses or CIDRs, each optionally with :port) (default: public, or none when the ceiling is narrower)`)
	fl.StringVar(&f.ceiling, "egress-ceiling", "public", "the widest network policy a member may give a server, in --egress-default's form: an allowlist ceiling admits allowlists of its entries (a wildcard covers its names, a CIDR the ones inside it)")
	fl.StringSliceVar(&f.reachable, "egress-reachable", nil, "address ranges (CIDRs) sandboxes may reach although berth refuses them whatever a policy says (private ranges, carrier-grade NAT, reserved ranges): an internal package mirror, say. berth's host and cloud metadata stay refused unless listed here exactly")
	fl.StringVar(&f.dns, "egress-dns", "", "DNS server (host:port) the egress gateway resolves sandboxes' names with (default: the host's resolver)")
	fl.StringVar(&f.bandwidth, "egress-bandwidth", "", "bytes per second each sandbox may move through the egress gateway, both ways together, e.g. 10Mi (default unlimited)")
	fl.IntVar(&f.connections, "egress-max-connections", 256, "concurrent outbound connections of each sandbox; past it a new one is refused")
	fl.StringVar(&f.bytes, "egress-max-bytes", "50Gi", "bytes each server's sandbox may move through the egress gateway in all, both ways; past it its connections are cut and new ones refused (0 = unlimited)")
}

// parsePolicyFlag reads "none", "public" or "allowlist:a,b".
func parsePolicyFlag(flag, v string) (egress.Policy, error) {
	mode, list, _ := strings.Cut(strings.TrimSpace(v), ":")
	p := egress.Policy{Egress: egress.Mode(strings.TrimSpace(mode))}
	if list != "" {
		for _, e := range strings.Split(list, ",") {
			if e = strings.TrimSpace(e); e != "" {
				p.Allow = append(p.Allow, e)
			}
		}
	}
	if err := p.Validate(); err != nil {
		return egress.Policy{}, fmt.Errorf("%s %q: %w", flag, v, err)
	}
	return p, nil
}

// policies returns the default and the ceiling (a zero default: the
// orchestrator's).
func (f *egressFlags) policies() (egress.Policy, egress.Ceiling, error) {
	var def egress.Policy
	var err error
	if f.defaultPolicy != "" {
		if def, err = parsePolicyFlag("--egress-default", f.defaultPolicy); err != nil {
			return def, egress.Ceiling{}, err
		}
	}
	ceil, err := parsePolicyFlag("--egress-ceiling", f.ceiling)
	return def, egress.Ceiling(ceil), err
}

// runtimeOptions are the local runtime's egress options; never are
// addresses no sandbox may reach whatever the operator lists (berth's
// database).
func (f *egressFlags) runtimeOptions(never []netip.AddrPort) (local.EgressOptions, error) {
	guard := &egress.Guard{Never: never}
	for _, r := range f.reachable {
		p, err := netip.ParsePrefix(strings.TrimSpace(r))
		if err != nil {
			a, aerr := netip.ParseAddr(strings.TrimSpace(r))
			if aerr != nil {
				return local.EgressOptions{}, fmt.Errorf("--egress-reachable %q: want a CIDR such as 10.20.0.0/16 or an address", r)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		guard.Reachable = append(guard.Reachable, p.Masked())
	}
	opts := local.EgressOptions{Guard: guard}
	if f.dns != "" {
		host, port, err := net.SplitHostPort(f.dns)
		if err != nil {
			return opts, fmt.Errorf("--egress-dns %q: want host:port", f.dns)
		}
		if _, err := strconv.Atoi(port); err != nil {
			return opts, fmt.Errorf("--egress-dns %q: want host:port", f.dns)
		}
		server := net.JoinHostPort(host, port)
		opts.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: 5 * time.Second}
			return d.DialContext(ctx, network, server)
		}}
	}
	if f.connections < 0 {
		return opts, fmt.Errorf("--egress-max-connections %d: want 0 (unlimited) or more", f.connections)
	}
	opts.Limits.Connections = f.connections
	var err error
	if f.bandwidth != "" && f.bandwidth != "0" {
		if opts.Limits.BytesPerSecond, err = quantity("--egress-bandwidth", f.bandwidth, false); err != nil {
			return opts, err
		}
	}
	if f.bytes != "" && f.bytes != "0" {
		if opts.Limits.Bytes, err = quantity("--egress-max-bytes", f.bytes, false); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

// databaseAddrs are the addresses of berth's database server, which no
// sandbox may reach whatever the operator makes reachable; none for a
// database on a unix socket.
func databaseAddrs(ctx context.Context, st interface{ ConnHost() (string, uint16) }) []netip.AddrPort {
	host, port := st.ConnHost()
	if host == "" || strings.HasPrefix(host, "/") {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	out := make([]netip.AddrPort, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, netip.AddrPortFrom(a.Unmap(), port))
	}
	return out
}
