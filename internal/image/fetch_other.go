//go:build !linux

package image

import (
	"context"
	"errors"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func bootID() string { return "" }

func syncfs(dir string) error { return errors.New("image cache: Linux only") }

func (e *ensure) unpack(ctx context.Context, l v1.Descriptor, b *budget, onBytes func(int64)) error {
	return errors.New("image cache: images are unpacked on Linux only")
}

func spreadLayers(dir string) {}
