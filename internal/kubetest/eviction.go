package kubetest

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// evictionPeriod is how often emptyDir usage is measured. A kubelet's
// eviction manager measures every 10s; tests want the verdict sooner.
const evictionPeriod = time.Second

// startEvictionWatch enforces the sizeLimit of the pod's emptyDir
// volumes as a kubelet does: a volume grown past its limit gets the pod
// evicted (containers killed, phase Failed, reason Evicted).
func (w *podWorker) startEvictionWatch(ctx context.Context) {
	limits := map[string]resource.Quantity{}
	for _, v := range w.latest().Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			limits[v.Name] = *v.EmptyDir.SizeLimit
		}
	}
	if len(limits) == 0 {
		return
	}
	w.bg.Add(1)
	go func() {
		defer w.bg.Done()
		t := time.NewTicker(evictionPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.stopping:
				return
			case <-t.C:
			}
			for name, limit := range limits {
				w.mu.Lock()
				dir := w.volumes[name]
				w.mu.Unlock()
				if used := dirSize(dir); used > limit.Value() {
					msg := fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", name, limit.String())
					w.event(ctx, corev1.EventTypeWarning, "Evicted", msg)
					w.stop(0, false, "Evicted", msg)
					return
				}
			}
		}
	}()
}

// dirSize is the bytes of the regular files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed meanwhile
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
