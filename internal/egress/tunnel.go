package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Tunnel bounds.
const (
	tunnelIdle   = 10 * time.Minute
	tunnelBuffer = 32 << 10
)

// tunnel copies between the sandbox's connection and the upstream one
// until both directions end, one fails, or neither carries a byte for
// idle. An end of stream in one direction is passed on as a half close,
// so protocols that finish sending before they read still work. Both
// connections are closed when it returns.
func tunnel(client, upstream net.Conn, idle time.Duration) {
	defer client.Close()
	defer upstream.Close()
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var wg sync.WaitGroup
	wg.Add(2)
	copyHalf := func(dst, src net.Conn) {
		defer wg.Done()
		if err := copyIdle(dst, src, idle, &last); err != nil {
			// A failed direction ends both: closing unblocks the other.
			client.Close()
			upstream.Close()
			return
		}
		closeWrite(dst)
	}
	go copyHalf(upstream, client)
	copyHalf(client, upstream)
	wg.Wait()
}

// copyIdle copies src to dst until src ends (nil) or something fails. A
// read deadline is set once per idle period, not per read; when it
// passes while the other direction was busy it is simply moved on.
func copyIdle(dst, src net.Conn, idle time.Duration, last *atomic.Int64) error {
	buf := make([]byte, tunnelBuffer)
	src.SetReadDeadline(time.Now().Add(idle))
	for {
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			lastAt := time.Unix(0, last.Load())
			if time.Since(lastAt) < idle {
				src.SetReadDeadline(lastAt.Add(idle))
				continue
			}
		}
		return err
	}
}
