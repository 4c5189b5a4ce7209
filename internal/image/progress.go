package image

import (
	"sync"
)

// Progress is how far an Ensure is, for the start operation to show: the
// bytes of the layers' blobs (compressed, as the registry sends them)
// and the layers, done and in all. Layers already cached count as done
// from the first report.
type Progress struct {
	Ref         string `json:"ref"`
	BytesDone   int64  `json:"bytes_done"`
	BytesTotal  int64  `json:"bytes_total"`
	LayersDone  int    `json:"layers_done"`
	LayersTotal int    `json:"layers_total"`
}

// reportEvery is how many bytes pass between two reports in one layer's
// download; a finished layer is always reported.
const reportEvery = 1 << 20

// progress adds up an Ensure's layers, which download concurrently (and
// may be another Ensure's download it waits on), and calls the caller's
// function one report at a time, with counts that never go back.
type progress struct {
	mu       sync.Mutex
	fn       func(Progress)
	p        Progress
	bytes    []int64
	done     []bool
	reported int64
	closed   bool
}

func newProgress(ref string, fn func(Progress), sizes []int64) *progress {
	p := &progress{fn: fn, bytes: make([]int64, len(sizes)), done: make([]bool, len(sizes))}
	p.p.Ref = ref
	p.p.LayersTotal = len(sizes)
	for _, s := range sizes {
		p.p.BytesTotal += s
	}
	return p
}

// set records that layer i has n bytes downloaded.
func (p *progress) set(i int, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.done[i] || n <= p.bytes[i] {
		return
	}
	p.p.BytesDone += n - p.bytes[i]
	p.bytes[i] = n
	if p.p.BytesDone-p.reported >= reportEvery {
		p.report()
	}
}

// finish records that layer i, of size bytes, is in the cache.
func (p *progress) finish(i int, size int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.done[i] {
		return
	}
	p.done[i] = true
	if size > p.bytes[i] {
		p.p.BytesDone += size - p.bytes[i]
		p.bytes[i] = size
	}
	p.p.LayersDone++
	p.report()
}

// start reports the totals before anything is downloaded.
func (p *progress) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.report()
}

// close stops reports: nothing reaches the caller after Ensure returned,
// even from a download another Ensure still shares.
func (p *progress) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
}

func (p *progress) report() {
	p.reported = p.p.BytesDone
	if p.fn != nil {
		p.fn(p.p)
	}
}
