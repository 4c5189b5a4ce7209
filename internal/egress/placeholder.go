package egress

// PLACEHOLDER: replaced by the real gateway from branch h20-core at merge.

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

type Refusal struct {
	Name   string
	Addr   netip.AddrPort
	Reason string
	Time   time.Time
}

func (r *Refusal) Error() string { return "egress refused: " + r.Reason }

type Guard struct {
	Reachable []netip.Prefix
	Never     []netip.AddrPort
}

type Limits struct {
	BytesPerSecond int64
	Connections    int
	Bytes          int64
}

type Config struct {
	Guard     *Guard
	Resolver  *net.Resolver
	Dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	Policy    func(ctx context.Context) (Policy, error)
	Refused   func(Refusal)
	Allowed   func()
	Limits    Limits
	UsedBytes int64
	Logger    *slog.Logger
}

type Gateway struct{ cfg Config }

func NewGateway(cfg Config) *Gateway { return &Gateway{cfg: cfg} }

func (g *Gateway) Serve(ctx context.Context, proxy net.Listener, dnsUDP net.PacketConn, dnsTCP net.Listener) error {
	<-ctx.Done()
	proxy.Close()
	dnsUDP.Close()
	dnsTCP.Close()
	return nil
}

func (g *Gateway) Bytes() int64 { return 0 }
