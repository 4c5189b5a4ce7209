//go:build linux

package local

// ForceOverlayByPath makes r mount image roots as kernels before 6.15
// need, so that the tests run that way on a newer kernel too.
func ForceOverlayByPath(r *Runtime) { r.overlayByPath.Store(true) }

// OverlayByPath says whether r mounts image roots by path.
func OverlayByPath(r *Runtime) bool { return r.overlayByPath.Load() }

// TopLayer is the directory of the top layer of the cached image digest.
func TopLayer(r *Runtime, digest string) string {
	img, err := r.cache.Lookup(digest)
	if err != nil || len(img.Layers) == 0 {
		return ""
	}
	return img.Layers[len(img.Layers)-1]
}
