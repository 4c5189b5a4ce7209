package image

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// maxZstdWindow bounds the memory a zstd layer may make the decoder
// take; compressors use at most 8 MiB windows unless told otherwise.
const maxZstdWindow = 128 << 20

// decompression checks that a layer's media type is a filesystem layer
// and says which compressions to expect ("" lets the content tell, for
// registries that label everything as Docker's gzip).
func decompression(mt types.MediaType) (string, error) {
	switch mt {
	case types.DockerLayer, types.OCILayer, types.DockerUncompressedLayer, types.OCIUncompressedLayer, types.OCILayerZStd:
		return "", nil
	case types.DockerForeignLayer, types.OCIRestrictedLayer, types.OCIUncompressedRestrictedLayer:
		return "", fmt.Errorf("a foreign (non-distributable) layer, which berth does not fetch")
	}
	s := string(mt)
	if strings.HasSuffix(s, ".tar") || strings.HasSuffix(s, ".tar+gzip") || strings.HasSuffix(s, ".tar+zstd") {
		return "", nil
	}
	return "", fmt.Errorf("media type %q is not a filesystem layer", s)
}

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// decompress reads a layer blob as the tar it holds, by its first bytes.
func decompress(br *bufio.Reader) (io.ReadCloser, error) {
	head, err := br.Peek(4)
	if err != nil && err != io.EOF {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, nil
	case bytes.HasPrefix(head, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow),
			zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return zr.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}
