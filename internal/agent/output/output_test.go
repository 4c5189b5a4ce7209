package output

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestBufferKeepsEverythingUnderLimit(t *testing.T) {
	b := NewBuffer(10)
	b.Write([]byte("hello"))
	b.Write([]byte("world"))
	if got := b.String(); got != "helloworld" {
		t.Fatalf("String() = %q, want helloworld", got)
	}
	if b.Omitted() != 0 {
		t.Fatalf("Omitted() = %d, want 0", b.Omitted())
	}
}

func TestBufferHeadAndTail(t *testing.T) {
	b := NewBuffer(10)
	b.Write([]byte("0123456789abcdefghij"))
	want := "01234" + Marker(10) + "fghij"
	if got := b.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	if b.Omitted() != 10 || b.Total() != 20 {
		t.Fatalf("Omitted, Total = %d, %d; want 10, 20", b.Omitted(), b.Total())
	}
}

func TestBufferUnlimited(t *testing.T) {
	b := NewBuffer(-1)
	big := strings.Repeat("x", 1<<20)
	b.Write([]byte(big))
	if b.String() != big || b.Omitted() != 0 {
		t.Fatal("unlimited buffer dropped bytes")
	}
}

func TestBufferZeroLimit(t *testing.T) {
	b := NewBuffer(0)
	b.Write([]byte("abc"))
	if got := b.String(); got != Marker(3) {
		t.Fatalf("String() = %q", got)
	}
}

// TestBufferMatchesReference writes random chunks and compares against the
// obvious implementation that keeps the whole stream.
func TestBufferMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		limit := int64(r.IntN(40))
		b := NewBuffer(limit)
		var all bytes.Buffer
		for range r.IntN(20) {
			chunk := make([]byte, r.IntN(30))
			for i := range chunk {
				chunk[i] = byte('a' + r.IntN(26))
			}
			b.Write(chunk)
			all.Write(chunk)
		}
		want := all.String()
		if int64(len(want)) > limit {
			h := limit / 2
			want = want[:h] + Marker(int64(len(want))-limit) + want[int64(len(want))-(limit-h):]
		}
		if got := b.String(); got != want {
			t.Fatalf("limit %d: got %q, want %q", limit, got, want)
		}
	}
}

func BenchmarkBufferWrite(b *testing.B) {
	buf := NewBuffer(1 << 20)
	chunk := bytes.Repeat([]byte("y"), 32<<10)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		buf.Write(chunk)
	}
}

// TestBufferHeadStaysWithinLimit checks that growing the head on demand
// never allocates past its half of the limit, however the writes fall.
func TestBufferHeadStaysWithinLimit(t *testing.T) {
	for _, limit := range []int64{1, 600, 1000, 1 << 20} {
		b := NewBuffer(limit)
		for range 3000 {
			b.Write([]byte(strings.Repeat("z", 700)))
			if int64(cap(b.head)) > limit/2 || int64(cap(b.tail)) > limit-limit/2 {
				t.Fatalf("limit %d: head cap %d, tail cap %d", limit, cap(b.head), cap(b.tail))
			}
		}
	}
}

func TestBufferAllocatesNothingUnwritten(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = NewBuffer(1 << 20).String() }); n > 1 {
		t.Fatalf("an unwritten buffer cost %v allocations, want at most 1 (the Buffer)", n)
	}
}
