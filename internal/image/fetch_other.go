//go:build !linux

package image

import (
	"context"
	"errors"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func (e *ensure) unpack(ctx context.Context, l v1.Descriptor, diffID v1.Hash, b *budget, onBytes func(int64)) error {
	return errors.New("image cache: images are unpacked on Linux only")
}
