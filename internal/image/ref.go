package image

import (
	"fmt"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/google/go-containerregistry/pkg/name"
	godigest "github.com/opencontainers/go-digest"

	"github.com/berth-mcp/berth/internal/wire"
)

// maxRefLen bounds a reference before it is parsed: the grammar allows a
// 255-byte name, a 128-byte tag and a digest, well inside this.
const maxRefLen = 512

// Normalize resolves an image reference the one way berth knows, the
// way Docker and the kubelet's CRI runtimes do: a Docker Hub short name
// gains docker.io (and library/ for an official image), a reference with
// neither tag nor digest gains :latest, and one with both keeps only the
// digest, which is what is pulled anyway. "python:3.12" is
// "docker.io/library/python:3.12". Every runtime calls it, so one
// image_tag names the same image everywhere. A reference it refuses is a
// 400 naming it.
func Normalize(ref string) (string, error) {
	named, err := parse(ref)
	if err != nil {
		return "", err
	}
	return named.String(), nil
}

func parse(ref string) (reference.Named, error) {
	if len(ref) > maxRefLen {
		return nil, wire.Errorf(wire.CodeBadRequest, "image %q...: a reference is at most %d bytes", ref[:64], maxRefLen)
	}
	if strings.TrimSpace(ref) != ref || ref == "" {
		return nil, wire.Errorf(wire.CodeBadRequest, "image %q is not a valid image reference", ref)
	}
	named, err := reference.ParseDockerRef(ref)
	if err != nil {
		return nil, wire.Errorf(wire.CodeBadRequest, "image %q is not a valid image reference: %v", ref, err)
	}
	return named, nil
}

// remoteRef is ref as go-containerregistry names it (it spells Docker
// Hub's registry index.docker.io; the canonical string stays docker.io).
// A registry the operator listed as plain HTTP is reached so whatever
// its address (go-containerregistry by itself does only for loopback and
// private ones).
func remoteRef(named reference.Named, plainHTTP []string) (name.Reference, error) {
	opts := []name.Option{name.StrictValidation}
	if slices.Contains(plainHTTP, strings.ToLower(reference.Domain(named))) {
		opts = append(opts, name.Insecure)
	}
	r, err := name.ParseReference(named.String(), opts...)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", named, err)
	}
	return r, nil
}

// pinned says whether a normalized reference names a digest.
func pinned(named reference.Named) (string, bool) {
	if c, ok := named.(reference.Canonical); ok {
		return c.Digest().String(), true
	}
	return "", false
}

// WithDigest is ref's repository at digest ("docker.io/library/python@
// sha256:..."): what a holder that recorded its image's digest pulls to
// get exactly that image again, whatever its tag names now.
func WithDigest(ref, digest string) (string, error) {
	named, err := parse(ref)
	if err != nil {
		return "", err
	}
	d, err := godigest.Parse(digest)
	if err != nil {
		return "", wire.Errorf(wire.CodeBadRequest, "image %s: digest %q: %v", named, digest, err)
	}
	at, err := reference.WithDigest(reference.TrimNamed(named), d)
	if err != nil {
		return "", wire.Errorf(wire.CodeBadRequest, "image %s: %v", named, err)
	}
	return at.String(), nil
}

// LocalDomain is the registry part of the names of images this berth
// built and keeps in its cache only (no registry to push them to):
// berth.local/NAME:TAG. No registry is ever asked for one.
const LocalDomain = "berth.local"

// LocalRef is the normalized reference of the local image name:tag.
func LocalRef(name, tag string) (string, error) {
	return Normalize(LocalDomain + "/" + name + ":" + tag)
}

// IsLocal says whether ref (any reference Normalize takes) names an image
// of LocalDomain.
func IsLocal(ref string) bool {
	named, err := parse(ref)
	return err == nil && reference.Domain(named) == LocalDomain
}

// localError refuses to ask a registry for a local image.
func localError(named reference.Named) error {
	return wire.Errorf(wire.CodeBadRequest, "image %s: %s names images this berth built, which are in its image cache or nowhere (no registry has them): build it again",
		named, LocalDomain)
}
