//go:build linux

package local

// ForceOverlayByPath makes r mount image roots as kernels before 6.15
// need, so that the tests run that way on a newer kernel too.
func ForceOverlayByPath(r *Runtime) { r.overlayByPath.Store(true) }

// OverlayByPath says whether r mounts image roots by path.
func OverlayByPath(r *Runtime) bool { return r.overlayByPath.Load() }
