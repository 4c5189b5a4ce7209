package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/berth-mcp/berth/internal/wire"
)

// Read limits.
const (
	DefaultReadBytes int64 = 1 << 20
	MaxReadBytes     int64 = 16 << 20
	DefaultReadLines int64 = 2000
	binarySniffBytes       = 8 << 10
)

// Read returns part of a regular file. In byte mode offset and limit count
// bytes (limit 0 = 1 MiB, capped at 16 MiB); in line mode offset is the
// first line, 1-indexed (0 = 1), and limit counts lines (0 = 2000), with
// the content still capped at 16 MiB. Binary is set when the first 8 KiB
// hold a NUL byte; the content is returned as is.
func (w *Workspace) Read(ctx context.Context, path string, offset, limit int64, lines bool) (wire.ReadResult, error) {
	return w.ReadAtMost(ctx, path, offset, limit, lines, MaxReadBytes)
}

// ReadAtMost is Read with the content capped at maxBytes instead of 16 MiB
// (less only: 0 or more than 16 MiB is 16 MiB), so that a caller with a
// smaller budget, such as berth's server, gets a whole answer it can
// take.
func (w *Workspace) ReadAtMost(ctx context.Context, path string, offset, limit int64, lines bool, maxBytes int64) (wire.ReadResult, error) {
	if maxBytes <= 0 || maxBytes > MaxReadBytes {
		maxBytes = MaxReadBytes
	}
	if offset < 0 || limit < 0 {
		return wire.ReadResult{}, wire.Errorf(wire.CodeBadRequest, "read %s: offset %d and limit %d must not be negative", path, offset, limit)
	}
	t, err := w.resolve(path)
	if err != nil {
		return wire.ReadResult{}, err
	}
	f, size, err := w.openRegular("read", t)
	if err != nil {
		return wire.ReadResult{}, err
	}
	defer f.Close()
	res := wire.ReadResult{Path: t.disp, Size: size}
	sniff := make([]byte, min(size, binarySniffBytes))
	n, err := f.ReadAt(sniff, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return res, fsError("read", t.disp, err)
	}
	res.Binary = bytes.IndexByte(sniff[:n], 0) >= 0
	if lines {
		err = readLines(ctx, f, &res, offset, limit, maxBytes)
	} else {
		err = readBytes(f, &res, offset, limit, maxBytes)
	}
	if err != nil {
		return res, fsError("read", t.disp, err)
	}
	return res, nil
}

// openRegular opens t for reading after making sure it is a regular file,
// so that a FIFO or device cannot block or stream forever.
func (w *Workspace) openRegular(op string, t target) (*os.File, int64, error) {
	fi, err := w.fs.Stat(t.name)
	if err != nil {
		return nil, 0, fsError(op, t.disp, err)
	}
	if fi.IsDir() {
		return nil, 0, wire.Errorf(wire.CodeBadRequest, "%s %s: is a directory", op, t.disp)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, wire.Errorf(wire.CodeBadRequest, "%s %s: not a regular file (%s)", op, t.disp, fi.Mode().Type())
	}
	// O_NONBLOCK keeps a file swapped for a FIFO after the Stat from
	// blocking the open; it changes nothing for regular files.
	f, err := w.fs.OpenFile(t.name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, fsError(op, t.disp, err)
	}
	fi, err = f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fsError(op, t.disp, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, wire.Errorf(wire.CodeBadRequest, "%s %s: not a regular file (%s)", op, t.disp, fi.Mode().Type())
	}
	return f, fi.Size(), nil
}

func readBytes(f *os.File, res *wire.ReadResult, offset, limit, maxBytes int64) error {
	if limit == 0 {
		limit = DefaultReadBytes
	}
	limit = min(limit, maxBytes)
	res.Offset = offset
	want := min(limit, max(res.Size-offset, 0))
	buf := make([]byte, want)
	n, err := io.ReadFull(io.NewSectionReader(f, offset, want), buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	res.Content = string(buf[:n])
	res.Returned = int64(n)
	res.EOF = offset+int64(n) >= res.Size
	return nil
}

// readLines streams the whole file to count its lines but keeps only the
// requested ones.
func readLines(ctx context.Context, f *os.File, res *wire.ReadResult, offset, limit, maxBytes int64) error {
	if offset == 0 {
		offset = 1
	}
	if limit == 0 {
		limit = DefaultReadLines
	}
	res.Offset = offset
	last := offset + limit - 1
	br := bufio.NewReaderSize(f, 64<<10)
	var out bytes.Buffer
	line := int64(1)
	lineStarted := false // the current line has at least one byte
	cut := false         // the content cap cut the returned lines short
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		frag, err := br.ReadSlice('\n')
		if len(frag) > 0 {
			if line >= offset && line <= last && !cut {
				keep := frag
				room := int(maxBytes) - out.Len()
				if len(keep) > room {
					keep = keep[:room]
					cut = true
				}
				if len(keep) > 0 {
					if !lineStarted {
						res.Returned++
					}
					out.Write(keep)
				}
			}
			lineStarted = true
			if frag[len(frag)-1] == '\n' {
				line++
				lineStarted = false
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	total := line - 1
	if lineStarted {
		total = line // the last line has no trailing newline
	}
	res.TotalLines = total
	res.Content = out.String()
	res.EOF = !cut && offset+res.Returned > total
	return nil
}
