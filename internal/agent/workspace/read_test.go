package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

func TestReadBytes(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "f.txt", "0123456789")
	ctx := context.Background()
	cases := []struct {
		offset, limit int64
		want          string
		eof           bool
	}{
		{0, 0, "0123456789", true},
		{0, 4, "0123", false},
		{4, 3, "456", false},
		{7, 3, "789", true},
		{7, 100, "789", true},
		{10, 5, "", true},
		{50, 5, "", true},
	}
	for _, c := range cases {
		res, err := f.ws.Read(ctx, "f.txt", c.offset, c.limit, false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Content != c.want || res.EOF != c.eof || res.Size != 10 || res.Offset != c.offset || res.Returned != int64(len(c.want)) {
			t.Errorf("Read(%d, %d) = %+v; want %q eof=%v", c.offset, c.limit, res, c.want, c.eof)
		}
		if res.Binary || res.TotalLines != 0 {
			t.Errorf("Read(%d, %d) = %+v: binary or total_lines set", c.offset, c.limit, res)
		}
	}
}

func TestReadLines(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "five", "l1\nl2\nl3\nl4\nl5\n")
	f.write(t, "open", "a\nb\nc") // no newline at the end
	f.write(t, "empty", "")
	ctx := context.Background()
	cases := []struct {
		file          string
		offset, limit int64
		want          string
		returned      int64
		total         int64
		eof           bool
	}{
		{"five", 0, 0, "l1\nl2\nl3\nl4\nl5\n", 5, 5, true},
		{"five", 1, 2, "l1\nl2\n", 2, 5, false},
		{"five", 2, 2, "l2\nl3\n", 2, 5, false},
		{"five", 4, 2, "l4\nl5\n", 2, 5, true},
		{"five", 5, 10, "l5\n", 1, 5, true},
		{"five", 6, 10, "", 0, 5, true},
		{"open", 2, 0, "b\nc", 2, 3, true},
		{"open", 3, 1, "c", 1, 3, true},
		{"open", 1, 2, "a\nb\n", 2, 3, false},
		{"empty", 0, 0, "", 0, 0, true},
	}
	for _, c := range cases {
		res, err := f.ws.Read(ctx, c.file, c.offset, c.limit, true)
		if err != nil {
			t.Fatal(err)
		}
		wantOffset := max(c.offset, 1)
		if res.Content != c.want || res.Returned != c.returned || res.TotalLines != c.total || res.EOF != c.eof || res.Offset != wantOffset {
			t.Errorf("Read(%s, %d, %d) = %+v; want %q returned=%d total=%d eof=%v",
				c.file, c.offset, c.limit, res, c.want, c.returned, c.total, c.eof)
		}
	}
}

// Lines longer than the reader's buffer are still one line each.
func TestReadLongLines(t *testing.T) {
	f := newFixture(t, Options{})
	long := strings.Repeat("x", 200<<10)
	f.write(t, "long", long+"\nshort\n"+long)
	res, err := f.ws.Read(context.Background(), "long", 2, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Content != "short\n" || res.TotalLines != 3 || res.Returned != 1 || res.EOF {
		t.Errorf("got %+v", res)
	}
	res, err = f.ws.Read(context.Background(), "long", 3, 1, true)
	if err != nil || res.Content != long || !res.EOF {
		t.Errorf("last line: %d bytes, eof %v, %v", len(res.Content), res.EOF, err)
	}
}

func TestReadBinary(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "bin", "ab\x00cd")
	res, err := f.ws.Read(context.Background(), "bin", 0, 0, false)
	if err != nil || !res.Binary || res.Content != "ab\x00cd" {
		t.Errorf("got %+v, %v", res, err)
	}
}

func TestReadErrors(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "dir/f", "x")
	ctx := context.Background()
	_, err := f.ws.Read(ctx, "missing", 0, 0, false)
	wantCode(t, err, wire.CodeNotFound)
	_, err = f.ws.Read(ctx, "dir", 0, 0, false)
	wantCode(t, err, wire.CodeBadRequest)
	_, err = f.ws.Read(ctx, "dir/f/x", 0, 0, false)
	wantCode(t, err, wire.CodeBadRequest)
	_, err = f.ws.Read(ctx, "dir/f", -1, 0, false)
	wantCode(t, err, wire.CodeBadRequest)
	_, err = f.ws.Read(ctx, "dir/f", 0, -1, true)
	wantCode(t, err, wire.CodeBadRequest)
	if err := syscall.Mkfifo(filepath.Join(f.root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A FIFO without a writer would block an open for reading forever.
	_, err = f.ws.Read(ctx, "fifo", 0, 0, false)
	wantCode(t, err, wire.CodeBadRequest)
}

// A small window of a large file reads only that window.
func TestReadWindowOfLargeFile(t *testing.T) {
	f := newFixture(t, Options{})
	p := filepath.Join(f.root, "big")
	fh, _ := os.Create(p)
	fh.Truncate(50 << 20)
	fh.WriteAt([]byte("needle"), 30<<20)
	fh.Close()
	var res wire.ReadResult
	var err error
	grew := heapGrowth(func() { res, err = f.ws.Read(context.Background(), "big", 30<<20, 6, false) })
	if err != nil || res.Content != "needle" || res.EOF {
		t.Fatalf("got %+v, %v", res, err)
	}
	if grew > 1<<20 {
		t.Errorf("reading 6 bytes of a 50 MB file allocated %d bytes", grew)
	}
	// The byte limit is capped at 16 MiB.
	res, err = f.ws.Read(context.Background(), "big", 0, 40<<20, false)
	if err != nil || res.Returned != MaxReadBytes || res.EOF {
		t.Fatalf("capped read: returned %d eof %v, %v", res.Returned, res.EOF, err)
	}
}

func TestReadLinesCancelled(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "f", "a\nb\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.ws.Read(ctx, "f", 0, 0, true); err == nil {
		t.Fatal("read with a cancelled context succeeded")
	}
}

// TestReadAtMost: a caller's smaller byte budget caps the content in both
// modes, and a larger one is still 16 MiB at most.
func TestReadAtMost(t *testing.T) {
	f := newFixture(t, Options{})
	f.write(t, "f", "0123456789\nabcdefghij\n")
	ctx := context.Background()
	res, err := f.ws.ReadAtMost(ctx, "f", 0, 0, false, 4)
	if err != nil || res.Content != "0123" || res.EOF {
		t.Errorf("bytes at most 4: %+v %v", res, err)
	}
	res, err = f.ws.ReadAtMost(ctx, "f", 1, 2, true, 15)
	if err != nil || res.Content != "0123456789\nabcd" || res.Returned != 2 || res.EOF || res.TotalLines != 2 {
		t.Errorf("lines at most 15 bytes: %+v %v", res, err)
	}
	res, err = f.ws.ReadAtMost(ctx, "f", 0, 0, false, 1<<40)
	if err != nil || res.Returned != 22 || !res.EOF {
		t.Errorf("a budget above the cap: %+v %v", res, err)
	}
}
