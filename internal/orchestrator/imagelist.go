package orchestrator

import (
	"context"
	"fmt"
	"slices"

	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime"
)

// ImageList is list_images's answer: what start_server's image_tag may
// name on this berth, and what its runtime holds.
type ImageList struct {
	Runtime string `json:"runtime" jsonschema:"the runtime: local or kubernetes"`
	// Starts says what any namespace may start.
	Starts string `json:"starts" jsonschema:"what image_tag may name, for every namespace"`
	// Named are the images the runtime starts by a name of its own.
	Named []string `json:"named" jsonschema:"images started by name without a registry: on the local runtime host (the host system read-only), base and the images and templates build_images_from_yaml made"`
	// Configured are the images berth keeps ready or starts sessions of.
	Configured []ConfiguredImage `json:"configured" jsonschema:"the images this berth is set up to start: the session image and the warm pools"`
	// Cached are the OCI images the runtime holds; only a global admin
	// sees which (their references may name another namespace's work).
	Cached     []runtime.CachedImage `json:"cached,omitempty" jsonschema:"the OCI images in the local runtime's cache, most recently used first, with the sandboxes using each (global admins only)"`
	CachedN    int                   `json:"cached_count" jsonschema:"how many OCI images the cache holds"`
	CacheBytes int64                 `json:"cache_bytes" jsonschema:"bytes the cached images take on disk, about"`
	CacheLimit int64                 `json:"cache_limit" jsonschema:"the cache's size (--image-cache-size): past it, images no sandbox uses are evicted, least recently used first"`
}

// ConfiguredImage is an image berth is set up to start.
type ConfiguredImage struct {
	Image   string `json:"image" jsonschema:"the image_tag as configured"`
	Name    string `json:"name,omitempty" jsonschema:"the name the runtime knows it by (a reference normalized); empty when the runtime cannot start it"`
	Session bool   `json:"session,omitempty" jsonschema:"it is the image of session sandboxes (bash without a server)"`
	Warm    int    `json:"warm,omitempty" jsonschema:"ready servers kept of it (--warm-pool)"`
	Problem string `json:"problem,omitempty" jsonschema:"why the runtime cannot start it now"`
}

// ListImages says what images p may start and what the runtime holds.
func (s *Service) ListImages(ctx context.Context, p rbac.Principal) (ImageList, error) {
	out := ImageList{Runtime: s.rt.Info().Name, Named: []string{}, Configured: []ConfiguredImage{}}
	lister, ok := runtime.As[runtime.ImageLister](s.rt)
	if ok {
		imgs, err := lister.ListImages(ctx)
		if err != nil {
			return ImageList{}, fmt.Errorf("list images: %w", err)
		}
		out.Named, out.CachedN, out.CacheBytes, out.CacheLimit = imgs.Named, len(imgs.Cached), imgs.CacheBytes, imgs.CacheLimit
		if p.IsAdmin("") {
			out.Cached = imgs.Cached
		}
		out.Starts = "any image reference (registry/repository:tag, @sha256: digests, Docker Hub short names such as python:3.12), pulled at the start with the operator's registry credentials, or one of the named images; a bare name the runtime built an image or template of is that"
	} else {
		out.Starts = "any image reference the runtime's nodes can pull"
	}
	for _, img := range s.KnownImages() {
		c := ConfiguredImage{Image: img, Session: img == s.cfg.SessionImage, Warm: s.cfg.WarmPool[img]}
		if name, err := s.checkImage(ctx, img); err != nil {
			c.Problem = err.Error()
		} else {
			c.Name = name
		}
		out.Configured = append(out.Configured, c)
	}
	slices.SortStableFunc(out.Configured, func(a, b ConfiguredImage) int {
		switch {
		case a.Session == b.Session:
			return 0
		case a.Session:
			return -1
		}
		return 1
	})
	return out, nil
}
