package image

import (
	"io"
	"sync"
)

// A read-ahead holds readaheadBlocks blocks of readaheadSize: 1 MiB, two
// of them a layer being unpacked (see download).
const (
	readaheadBlocks = 4
	readaheadSize   = 256 << 10
)

// readahead reads r in a goroutine of its own, a few blocks ahead of its
// reader: a layer's download, digest check and decompression then run on
// one core while its files are written on another, instead of taking
// turns. What it holds is bounded (readaheadBlocks blocks), and r's data
// and its error come out in order. stop ends the goroutine; r is the
// caller's again once stop returns.
type readahead struct {
	full     chan []byte // blocks read, in order; closed after the last
	free     chan []byte
	quit     chan struct{}
	wg       sync.WaitGroup
	err      error  // r's error, set before full is closed
	cur      []byte // what is left of the block being read
	blk      []byte // that block, to give back
	stopOnce sync.Once
}

func newReadahead(r io.Reader) *readahead {
	ra := &readahead{full: make(chan []byte, readaheadBlocks), free: make(chan []byte, readaheadBlocks), quit: make(chan struct{})}
	for range readaheadBlocks {
		ra.free <- make([]byte, readaheadSize)
	}
	ra.wg.Add(1)
	go ra.run(r)
	return ra
}

func (ra *readahead) run(r io.Reader) {
	defer ra.wg.Done()
	defer close(ra.full)
	for {
		var b []byte
		select {
		case b = <-ra.free:
		case <-ra.quit:
			return
		}
		n, err := io.ReadFull(r, b)
		if n > 0 {
			ra.full <- b[:n] // never blocks: there are as many slots as blocks
		}
		switch err {
		case nil:
		case io.ErrUnexpectedEOF:
			ra.err = io.EOF
			return
		default:
			ra.err = err
			return
		}
	}
}

func (ra *readahead) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(ra.cur) == 0 {
		if ra.blk != nil {
			ra.free <- ra.blk[:cap(ra.blk)]
			ra.blk = nil
		}
		b, ok := <-ra.full
		if !ok {
			return 0, ra.err
		}
		ra.blk, ra.cur = b, b
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// stop ends the read-ahead and waits until it no longer reads r: at most
// the one read under way, which the caller's closing of r's source (or
// its context) ends.
func (ra *readahead) stop() {
	ra.stopOnce.Do(func() { close(ra.quit) })
	ra.wg.Wait()
}
