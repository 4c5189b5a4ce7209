package image

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// errDigest marks a layer whose content is not what its digest says.
var errDigest = errors.New("the registry's content does not match the layer's digest")

// download streams layer l's blob from the registry, checked against
// its manifest size and digest, as the tar it holds to sink, and checks
// the tar against diffID (the config's). onBytes hears the blob's bytes
// as they come. A sink's error wins unless the blob turns out not to be
// the layer, which is then the error.
func (e *ensure) download(ctx context.Context, l v1.Descriptor, diffID v1.Hash, onBytes func(int64), sink func(io.Reader) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	layer, err := remote.Layer(e.ref.Context().Digest(l.Digest.String()), append(e.opts, remote.WithContext(ctx))...)
	if err != nil {
		return e.registryError(err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		return e.registryError(err)
	}
	defer rc.Close()
	blob := &blobReader{r: rc, size: l.Size, on: onBytes}
	br := bufio.NewReaderSize(blob, 256<<10)
	dr, err := decompress(br)
	if err != nil {
		return blob.explain(err)
	}
	defer dr.Close()
	h, err := v1.Hasher(diffID.Algorithm)
	if err != nil {
		return err
	}
	// A tar's bytes: entries and their data are bounded by the budget; a
	// stream that goes on past them is refused here too.
	limit := e.c.opts.MaxImageBytes + e.c.opts.MaxImageEntries*8<<10 + maxTrailing
	tr := &capReader{r: io.TeeReader(dr, h), left: limit}
	if err := sink(tr); err != nil {
		var ee *entryError
		if !errors.As(err, &ee) || blob.err != nil {
			// Unreadable (or not what the registry should have sent):
			// read the rest to tell a wrong digest from a broken layer.
			return blob.explain(err)
		}
		return err
	}
	// What follows the tar's end is hashed too (the diff ID covers it),
	// and bounded.
	n, err := io.Copy(io.Discard, io.LimitReader(tr, maxTrailing+1))
	if err != nil {
		return blob.explain(fmt.Errorf("read past the tar's end: %w", err))
	}
	if n > maxTrailing {
		return fmt.Errorf("over %d bytes follow the tar's end", maxTrailing)
	}
	if err := blob.drain(); err != nil {
		return err
	}
	if got := (v1.Hash{Algorithm: diffID.Algorithm, Hex: hex.EncodeToString(h.Sum(nil))}); got != diffID {
		return fmt.Errorf("its tar is %s, the image's config says %s: %w", got, diffID, errDigest)
	}
	return nil
}

// blobReader counts a layer blob's bytes, refuses more than the manifest
// said, and keeps the first read error (go-containerregistry's digest
// check reports at the blob's end).
type blobReader struct {
	r    io.Reader
	size int64
	n    int64
	on   func(int64)
	err  error
}

func (b *blobReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if left := b.size - b.n; int64(len(p)) > left+1 {
		p = p[:left+1]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	if n > 0 && b.on != nil {
		b.on(int64(n))
	}
	switch {
	case b.n > b.size:
		err = fmt.Errorf("the registry sent over the %d bytes the manifest says: %w", b.size, errDigest)
	case err == io.EOF && b.n < b.size:
		err = fmt.Errorf("the registry sent %d of the %d bytes the manifest says: %w", b.n, b.size, errDigest)
	case err != nil && err != io.EOF && strings.HasPrefix(err.Error(), "error verifying"):
		// go-containerregistry checks the size and digest as the last
		// byte comes, and says so instead of io.EOF (its error type is
		// internal to it; the text has been the same for years).
		err = fmt.Errorf("%w: %v", errDigest, err)
	case err != nil && err != io.EOF:
		err = &fetchError{err}
	}
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

// fetchError is a download that failed on the way: the registry's or
// the network's fault, not the image's.
type fetchError struct{ err error }

func (e *fetchError) Error() string { return "download: " + e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

// drain reads the blob to its end, so its size and digest are checked.
func (b *blobReader) drain() error {
	_, err := io.Copy(io.Discard, b)
	return err
}

// explain returns why reading failed: a blob that is not the layer or a
// failed download, if reading the rest shows that, else err.
func (b *blobReader) explain(err error) error {
	if b.err == nil {
		b.drain()
	}
	if b.err != nil {
		return b.err
	}
	return err
}

// capReader fails once more than left bytes are read.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errors.New("the layer's tar is longer than the image's limits allow")
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// verify downloads a layer the cache has from another repository, to
// know this repository's registry has it too, and records that.
func (e *ensure) verify(ctx context.Context, l v1.Descriptor, diffID v1.Hash, onBytes func(int64)) error {
	err := e.download(ctx, l, diffID, onBytes, func(r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if err != nil {
		return err
	}
	return e.c.addSource(diffID.String(), e.source)
}
