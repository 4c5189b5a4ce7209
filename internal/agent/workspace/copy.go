package workspace

import (
	"context"
	"fmt"
	"io"
)

const copyChunk = 32 << 10

// copyN copies exactly n bytes in fixed chunks, checking ctx between
// chunks so a large transfer can be cancelled. A source that ends early is
// an error.
func copyN(ctx context.Context, dst io.Writer, src io.Reader, n int64, buf []byte) error {
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk := buf[:min(int64(len(buf)), n)]
		got, err := io.ReadFull(src, chunk)
		if got > 0 {
			if _, werr := dst.Write(chunk[:got]); werr != nil {
				return werr
			}
			n -= int64(got)
		}
		if err != nil {
			if n > 0 && (err == io.EOF || err == io.ErrUnexpectedEOF) {
				return fmt.Errorf("source ended %d bytes early: %w", n, io.ErrUnexpectedEOF)
			}
			if n > 0 {
				return err
			}
		}
	}
	return nil
}
