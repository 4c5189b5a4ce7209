package kubetest

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// NodeImage is a container image for the real node, made by the test
// from files at hand (there is no Docker engine nor registry here) and
// written as an image archive that the node's containerd imports
// (RealNode.Import). Pods name it by Ref with a pull policy that does not
// pull (IfNotPresent, berth's default), so the kubelet never asks a
// registry for it.
type NodeImage struct {
	// Ref is the reference pods name the image by, as in a pod spec:
	// "registry.test/sandbox:1".
	Ref string
	// Layers are the image's filesystem, lowest first.
	Layers []*Layer
	// The image config a Containerfile would set.
	Entrypoint, Cmd, Env []string
	User, WorkingDir     string
}

// Layer is one filesystem layer: files, folders and links, each owned by
// root unless it copies a host file (which keeps its owner and mode,
// setuid bits included). Folders a path needs are added, 0755 and owned
// by root, unless the layer names them itself.
type Layer struct {
	entries map[string]layerEntry
}

type layerEntry struct {
	hdr  tar.Header
	host string // file content from this host path
	data []byte // or this content
}

// NewLayer returns an empty layer.
func NewLayer() *Layer { return &Layer{entries: map[string]layerEntry{}} }

// Content adds a file holding data.
func (l *Layer) Content(inImage string, data []byte, mode fs.FileMode) {
	l.add(layerEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Mode: int64(mode), Size: int64(len(data))}, data: data}, inImage)
}

// Dir adds a folder.
func (l *Layer) Dir(inImage string, mode fs.FileMode) {
	l.add(layerEntry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: int64(mode)}}, inImage)
}

// Symlink adds a symbolic link to target.
func (l *Layer) Symlink(inImage, target string) {
	l.add(layerEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777}}, inImage)
}

// HostFile adds the host's file, folder or link at host (not followed)
// as inImage, with its mode and owner. Anything else (a socket, a
// device) is an error: images made here hold none.
func (l *Layer) HostFile(inImage, host string) error {
	st, err := os.Lstat(host)
	if err != nil {
		return fmt.Errorf("image file %s: %w", inImage, err)
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	e := layerEntry{hdr: tar.Header{Mode: int64(st.Mode().Perm())}}
	if st.Mode()&fs.ModeSetuid != 0 {
		e.hdr.Mode |= 0o4000
	}
	if st.Mode()&fs.ModeSetgid != 0 {
		e.hdr.Mode |= 0o2000
	}
	if st.Mode()&fs.ModeSticky != 0 {
		e.hdr.Mode |= 0o1000
	}
	if sys != nil {
		e.hdr.Uid, e.hdr.Gid = int(sys.Uid), int(sys.Gid)
	}
	switch {
	case st.Mode().IsRegular():
		e.hdr.Typeflag, e.hdr.Size, e.host = tar.TypeReg, st.Size(), host
	case st.IsDir():
		e.hdr.Typeflag = tar.TypeDir
	case st.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(host)
		if err != nil {
			return fmt.Errorf("image file %s: %w", inImage, err)
		}
		e.hdr.Typeflag, e.hdr.Linkname = tar.TypeSymlink, target
	default:
		return fmt.Errorf("image file %s: %s is a %s, not a file, folder or link", inImage, host, st.Mode().Type())
	}
	l.add(e, inImage)
	return nil
}

func (l *Layer) add(e layerEntry, inImage string) {
	p := strings.TrimPrefix(path.Clean("/"+inImage), "/")
	if p == "" {
		return // the root is the image's, not a layer's
	}
	e.hdr.Name = p
	l.entries[p] = e
}

// writeTar writes the layer as a tar stream: parents before children,
// in a fixed order, with fixed times, so equal layers are equal blobs.
func (l *Layer) writeTar(w io.Writer) error {
	entries := map[string]layerEntry{}
	for p, e := range l.entries {
		entries[p] = e
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := entries[dir]; !ok {
				if own, ok := l.entries[dir]; ok {
					entries[dir] = own
				} else {
					entries[dir] = layerEntry{hdr: tar.Header{Name: dir, Typeflag: tar.TypeDir, Mode: 0o755}}
				}
			}
		}
	}
	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names) // a parent sorts before its children
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	for _, p := range names {
		e := entries[p]
		hdr := e.hdr
		hdr.Format, hdr.ModTime = tar.FormatPAX, epoch
		if hdr.Typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(&hdr); err != nil {
			return fmt.Errorf("layer entry %s: %w", p, err)
		}
		switch {
		case e.data != nil:
			if _, err := tw.Write(e.data); err != nil {
				return fmt.Errorf("layer entry %s: %w", p, err)
			}
		case e.host != "":
			if err := copyHostFile(tw, e.host, hdr.Size); err != nil {
				return fmt.Errorf("layer entry %s: %w", p, err)
			}
		}
	}
	return tw.Close()
}

// copyHostFile copies exactly size bytes of the host file: one that
// changed size since it was listed fails the image rather than the tar.
func copyHostFile(w io.Writer, host string, size int64) error {
	f, err := os.Open(host)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err == nil && n != size {
		err = fmt.Errorf("%s changed size while being read", host)
	}
	return err
}

// Image builds the image with go-containerregistry, for a test to push
// to a registry. Its layers are written to files in tmpDir, which must
// stay until the image has been read (pushed or archived).
func (img NodeImage) Image(tmpDir string) (v1.Image, error) {
	var layers []v1.Layer
	for i, l := range img.Layers {
		// Written once to a file: the library reads a layer several times
		// (its digest, its diff ID, the archive).
		f, err := os.CreateTemp(tmpDir, "layer-*.tar")
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", img.Ref, err)
		}
		err = l.writeTar(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("image %s layer %d: %w", img.Ref, i, err)
		}
		layer, err := tarball.LayerFromFile(f.Name(), tarball.WithCompressedCaching)
		if err != nil {
			return nil, fmt.Errorf("image %s layer %d: %w", img.Ref, i, err)
		}
		layers = append(layers, layer)
	}
	base, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint, cf.Config.Cmd = img.Entrypoint, img.Cmd
	cf.Config.Env = img.Env
	if cf.Config.Env == nil {
		cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	cf.Config.User, cf.Config.WorkingDir = img.User, img.WorkingDir
	out, err := mutate.ConfigFile(base, cf)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	return out, nil
}

// writeArchive writes the images as one image archive (the format
// `docker save` writes, which `ctr images import` reads), each under its
// reference.
func writeArchive(archive, tmpDir string, imgs []NodeImage) error {
	refs := map[name.Reference]v1.Image{}
	for _, img := range imgs {
		tag, err := name.NewTag(img.Ref)
		if err != nil {
			return fmt.Errorf("image reference %q: %w", img.Ref, err)
		}
		built, err := img.Image(tmpDir)
		if err != nil {
			return err
		}
		refs[tag] = built
	}
	if err := tarball.MultiRefWriteToFile(archive, refs); err != nil {
		return fmt.Errorf("write image archive %s: %w", archive, err)
	}
	return nil
}
