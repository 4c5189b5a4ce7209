package runtime

import (
	"context"
	"strconv"
)

// Disk is the one resource whose use a sandbox cannot give back on its
// own terms: what it takes, others lack. Runtimes say how much disk a
// sandbox takes, so the orchestrator can hold each user to a total, and
// those that keep sandboxes' disk on a filesystem of berth's say how much
// of it is left.

// DiskSizer is implemented by runtimes whose sandboxes take a known amount
// of disk: the local runtime's workspace volume, the Kubernetes runtime's
// workspace emptyDir size limit.
type DiskSizer interface {
	// SandboxDisk is the disk, in bytes, a sandbox of spec takes for its
	// life; 0 when it is not bounded (no quota can count it).
	SandboxDisk(spec Spec) int64
}

// SpaceReporter is implemented by runtimes that keep sandboxes' disk on a
// filesystem of berth's (the local runtime's data directory) and keep a
// reserve on it, below which they start no new sandbox.
type SpaceReporter interface {
	Space(ctx context.Context) (Space, error)
}

// Space is the free space of a runtime's filesystem.
type Space struct {
	// FreeBytes is what an unprivileged writer could still write there.
	FreeBytes int64 `json:"free_bytes"`
	// ReserveBytes is kept for berth and the sandboxes that exist: no new
	// sandbox takes it.
	ReserveBytes int64 `json:"reserve_bytes"`
	// Low is set when the free space is below the reserve: new sandboxes
	// are refused until space is freed.
	Low bool `json:"low"`
}

// FormatBytes writes a size as operators give it in flags: 10Gi, 512Mi,
// or with one decimal (1.5Gi) when it is not a whole number of units.
func FormatBytes(n int64) string {
	units := []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	if n < 1024 && n > -1024 {
		return strconv.FormatInt(n, 10)
	}
	v, unit := float64(n), ""
	for _, u := range units {
		if v < 1024 && v > -1024 {
			break
		}
		v, unit = v/1024, u
	}
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10) + unit
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + unit
}
