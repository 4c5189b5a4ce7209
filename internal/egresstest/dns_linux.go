package egresstest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

const (
	// dnsTCPConns bounds the DNS connections served at once; more wait in
	// the listen queue.
	dnsTCPConns = 32
	// dnsTCPQueries bounds the queries of one connection, and dnsTCPIdle
	// how long it may sit between them.
	dnsTCPQueries = 100
	dnsTCPIdle    = 10 * time.Second
)

// serveDNS serves i.zone on UDP and TCP port 53 of the DNS host's
// addresses.
func (i *Internet) serveDNS(ctx context.Context) error {
	for _, a := range []string{i.DNS, i.DNS6} {
		pc, err := i.ns.ListenPacket(ctx, "udp", a)
		if err != nil {
			return err
		}
		i.goServe(func() { i.serveDNSPackets(pc) }, func(context.Context) error { return pc.Close() })
		l, err := i.listen(ctx, "tcp", a)
		if err != nil {
			return err
		}
		conns := newConnSet()
		i.goServe(func() { i.serveDNSStreams(l, conns) }, func(context.Context) error {
			err := l.Close()
			conns.closeAll()
			return err
		})
	}
	return nil
}

// serveDNSPackets answers UDP queries one after another until pc is
// closed.
func (i *Internet) serveDNSPackets(pc net.PacketConn) {
	buf := make([]byte, 4096)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				i.logf("dns: read: %v", err)
			}
			return
		}
		if reply := i.zone.answer(buf[:n], 512); reply != nil {
			pc.WriteTo(reply, from)
		}
	}
}

// serveDNSStreams accepts TCP connections until l is closed, serving at
// most dnsTCPConns at once.
func (i *Internet) serveDNSStreams(l net.Listener, conns *connSet) {
	slots := make(chan struct{}, dnsTCPConns)
	for {
		slots <- struct{}{}
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				i.logf("dns: accept: %v", err)
			}
			return
		}
		if !conns.add(c) {
			c.Close()
			return
		}
		i.wg.Add(1)
		go func() {
			defer i.wg.Done()
			defer func() { <-slots }()
			defer conns.remove(c)
			i.serveDNSStream(c)
		}()
	}
}

// serveDNSStream answers the length-prefixed queries of one connection.
func (i *Internet) serveDNSStream(c net.Conn) {
	defer c.Close()
	msg := make([]byte, 65535)
	for range dnsTCPQueries {
		c.SetDeadline(time.Now().Add(dnsTCPIdle))
		var n [2]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		q := msg[:binary.BigEndian.Uint16(n[:])]
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		reply := i.zone.answer(q, 65535)
		if reply == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reply)), uint16(len(reply)))
		if _, err := c.Write(append(out, reply...)); err != nil {
			return
		}
	}
}

// SetName makes name (in .test) resolve to addrs in the internet's DNS,
// replacing what it had; with no addrs, the name exists with no address.
// It panics on a name outside .test, as a test mistake.
func (i *Internet) SetName(name string, addrs ...netip.Addr) {
	if err := i.zone.set(name, addrs...); err != nil {
		panic(fmt.Sprintf("egresstest: SetName: %v", err))
	}
}

// Resolver returns a resolver that asks the internet's DNS server and no
// other (the Go resolver still reads /etc/hosts first, which names no
// .test host).
func (i *Internet) Resolver() *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, i.DNS)
		},
	}
}
