package image

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// errDigest marks a layer whose content is not what its digest says.
var errDigest = errors.New("the registry's content does not match the layer's digest")

// blob opens layer l's blob at the registry, to be read through a
// blobReader that checks it against the manifest's size and digest.
func (e *ensure) blob(ctx context.Context, l v1.Descriptor, onBytes func(int64)) (*blobReader, io.Closer, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	layer, err := remote.Layer(e.ref.Context().Digest(l.Digest.String()), append(e.opts, remote.WithContext(ctx))...)
	if err != nil {
		return nil, nil, e.registryError(err)
	}
	rc, err := layer.Compressed()
	if err != nil {
		return nil, nil, e.registryError(err)
	}
	return &blobReader{r: rc, size: l.Size, on: onBytes}, rc, nil
}

// download streams layer l's blob from the registry as the tar it holds
// to sink, then reads the blob to its end so that its size and digest
// are checked: a layer is only ever kept once all of it is known to be
// the one the manifest names. onBytes hears the blob's bytes as they
// come. A sink's error wins unless the blob turns out not to be the
// layer, which is then the error.
func (e *ensure) download(ctx context.Context, l v1.Descriptor, onBytes func(int64), sink func(io.Reader) error) error {
	blob, closer, err := e.blob(ctx, l, onBytes)
	if err != nil {
		return err
	}
	defer closer.Close()
	// Three goroutines, each a few blocks ahead of the next (readahead):
	// the download with its digest check, the decompression, and sink's
	// writing of the files, so that a layer's pull is not one core's.
	raw := newReadahead(blob)
	dr, err := decompress(bufio.NewReaderSize(raw, 256<<10))
	if err != nil {
		raw.stop()
		return blob.explain(err)
	}
	defer dr.Close()
	// Entries and their data are bounded by the budget; a stream that
	// goes on past them (padding, huge PAX records) is refused here.
	limit := e.c.opts.MaxImageBytes + e.c.opts.MaxImageEntries*8<<10 + 1<<20
	tr := newReadahead(&capReader{r: dr, left: limit})
	err = sink(tr)
	tr.stop()
	raw.stop() // the blob is this goroutine's again
	if err != nil {
		var ee *entryError
		if !errors.As(err, &ee) || blob.err != nil {
			// Unreadable (or not what the registry should have sent):
			// read the rest to tell a wrong digest from a broken layer.
			return blob.explain(err)
		}
		return err
	}
	return blob.drain()
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
func (e *ensure) verify(ctx context.Context, l v1.Descriptor, onBytes func(int64)) error {
	blob, closer, err := e.blob(ctx, l, onBytes)
	if err != nil {
		return err
	}
	defer closer.Close()
	if err := blob.drain(); err != nil {
		return err
	}
	return e.c.addSource(l.Digest.String(), e.source)
}
