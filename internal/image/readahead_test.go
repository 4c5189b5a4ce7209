package image

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// chunky returns its data in reads of varied sizes, then err.
type chunky struct {
	data []byte
	rng  *rand.Rand
	err  error
}

func (c *chunky) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, c.err
	}
	n := min(len(p), len(c.data), 1+c.rng.IntN(100<<10))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// TestReadaheadKeepsOrder: what the read-ahead gives is its source's
// bytes in order, then its source's error (io.EOF, or a failure after
// the bytes that came before it).
func TestReadaheadKeepsOrder(t *testing.T) {
	data := make([]byte, 3*readaheadBlocks*readaheadSize+12345)
	for i := range data {
		data[i] = byte(i * 7 >> 3)
	}
	broken := errors.New("the registry went away")
	for _, end := range []error{io.EOF, broken} {
		ra := newReadahead(&chunky{data: data, rng: rand.New(rand.NewPCG(1, 2)), err: end})
		var got bytes.Buffer
		buf := make([]byte, 7000)
		var err error
		for err == nil {
			var n int
			n, err = ra.Read(buf)
			got.Write(buf[:n])
		}
		ra.stop()
		if !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("read %d bytes, not the source's %d", got.Len(), len(data))
		}
		if err != end {
			t.Fatalf("after the data: %v, want %v", err, end)
		}
		if n, err := ra.Read(buf); n != 0 || err != end {
			t.Fatalf("read again: %d, %v", n, err)
		}
	}
}

// blocking gives one block, then blocks until release is closed.
type blocking struct {
	sent     bool
	release  chan struct{}
	reading  chan struct{}
	returned atomic.Bool
}

func (b *blocking) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return len(p), nil
	}
	close(b.reading)
	<-b.release
	b.returned.Store(true)
	return 0, errors.New("closed")
}

// TestReadaheadStop: stop ends the read-ahead before the source is read
// to its end, and returns only once the read under way (which the caller
// ends by closing the source) has returned, so the source is the
// caller's again.
func TestReadaheadStop(t *testing.T) {
	src := &blocking{release: make(chan struct{}), reading: make(chan struct{})}
	ra := newReadahead(src)
	<-src.reading
	stopped := make(chan struct{})
	go func() {
		ra.stop()
		close(stopped)
	}()
	close(src.release)
	<-stopped
	if !src.returned.Load() {
		t.Fatal("stop returned while its goroutine was still reading the source")
	}
	ra.stop() // again: nothing happens
}
