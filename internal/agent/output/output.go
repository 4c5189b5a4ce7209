// Package output captures a command's output stream with bounded memory:
// it keeps the head and the tail of the stream and counts what it dropped
// in between, so an agent sees both how a command started and how it ended.
package output

import (
	"strings"
	"sync"

	"github.com/berth-mcp/berth/internal/wire"
)

// Buffer is an io.Writer that keeps at most limit bytes: the first half of
// the limit as the head and the rest as a ring of the latest bytes. A
// negative limit keeps everything. It is safe for concurrent use.
type Buffer struct {
	mu    sync.Mutex
	limit int64
	head  []byte
	tail  []byte // ring buffer of capacity tailCap once the head is full
	start int    // index of the oldest byte in tail when the ring is full
	full  bool   // the ring has wrapped at least once
	total int64  // bytes written in all
}

// NewBuffer returns a Buffer keeping at most limit bytes (negative: no
// limit). It allocates nothing until written to: most commands print a
// line or nothing, and a buffer sized to the limit on every call was most
// of a one-shot command's garbage (128 KiB a call), paid back in GC.
func NewBuffer(limit int64) *Buffer {
	return &Buffer{limit: limit}
}

// minHead is the first allocation of the head, enough for a typical
// command's whole output.
const minHead = 512

// growBounded returns s with room for n more bytes, doubling its capacity
// but never past limit (len(s)+n must not exceed it), so the memory
// bound holds exactly however the writes fall.
func growBounded(s []byte, n, limit int) []byte {
	need := len(s) + n
	if need <= cap(s) {
		return s
	}
	grown := make([]byte, len(s), min(max(2*cap(s), need, minHead), limit))
	copy(grown, s)
	return grown
}

func (b *Buffer) headCap() int64 { return b.limit / 2 }
func (b *Buffer) tailCap() int64 { return b.limit - b.limit/2 }

// Write implements io.Writer. It never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.total += int64(n)
	if b.limit < 0 {
		b.head = append(b.head, p...)
		return n, nil
	}
	if room := b.headCap() - int64(len(b.head)); room > 0 {
		take := min(int64(len(p)), room)
		b.head = growBounded(b.head, int(take), int(b.headCap()))
		b.head = append(b.head, p[:take]...)
		p = p[take:]
	}
	if len(p) == 0 {
		return n, nil
	}
	tc := int(b.tailCap())
	if tc == 0 {
		return n, nil
	}
	if len(p) >= tc {
		// The write alone fills the ring: keep its last tc bytes.
		if cap(b.tail) < tc {
			b.tail = make([]byte, tc)
		}
		b.tail = b.tail[:tc]
		copy(b.tail, p[len(p)-tc:])
		b.start, b.full = 0, true
		return n, nil
	}
	if !b.full {
		if room := tc - len(b.tail); len(p) <= room {
			b.tail = growBounded(b.tail, len(p), tc)
			b.tail = append(b.tail, p...)
			return n, nil
		}
		// Grow the ring to its final size and fall through to wrapping.
		grown := make([]byte, tc)
		used := copy(grown, b.tail)
		b.tail = grown
		b.start = used
		copied := copy(b.tail[used:], p)
		p = p[copied:]
		b.start = 0
		b.full = true
		// The ring is now exactly full with the oldest byte at 0; the
		// rest of p overwrites from there.
	}
	for len(p) > 0 {
		c := copy(b.tail[b.start:], p)
		p = p[c:]
		b.start = (b.start + c) % tc
	}
	return n, nil
}

// Total reports how many bytes were written in all.
func (b *Buffer) Total() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total
}

// Omitted reports how many bytes were dropped from the middle.
func (b *Buffer) Omitted() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.omitted()
}

func (b *Buffer) omitted() int64 {
	if b.limit < 0 || b.total <= b.limit {
		return 0
	}
	return b.total - b.limit
}

// Marker is the line put where bytes were dropped.
func Marker(omitted int64) string { return wire.OmittedMarker(omitted) }

// String returns the kept output: everything when nothing was dropped,
// else the head, a marker line naming the omitted byte count, and the tail.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.total == 0 {
		return ""
	}
	var s strings.Builder
	s.Grow(len(b.head) + len(b.tail) + 48)
	s.Write(b.head)
	if om := b.omitted(); om > 0 {
		s.WriteString(Marker(om))
	}
	if b.full {
		s.Write(b.tail[b.start:])
		s.Write(b.tail[:b.start])
	} else {
		s.Write(b.tail)
	}
	return s.String()
}
