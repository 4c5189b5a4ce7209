package orchestrator

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// Disk is held to two bounds. Each user's live servers together take at
// most MaxDiskPerUser, counted here from what the runtime says a sandbox
// takes (runtime.DiskSizer), in the start's transaction like the server
// quota. And a runtime that keeps sandboxes on a filesystem of berth's
// (runtime.SpaceReporter) keeps a reserve there and refuses what would
// go below it; /readyz, the metrics and the log report it.

// DefaultMaxDiskPerUser is Config.MaxDiskPerUser by default: five
// sandboxes of the local runtime's default 10 GiB volume, each allocated
// whole on the host, so one user cannot take a host's disk by starting
// the ten servers the server quota allows.
const DefaultMaxDiskPerUser = 50 << 30

// sandboxDisk is the disk a sandbox of spec takes on this runtime; 0
// when the runtime does not say (no disk quota counts it).
func (s *Service) sandboxDisk(spec runtime.Spec) int64 {
	if d, ok := runtime.As[runtime.DiskSizer](s.rt); ok {
		return d.SandboxDisk(spec)
	}
	return 0
}

// serverSpec is what sizes srv's sandbox.
func serverSpec(srv store.Server) runtime.Spec {
	return runtime.Spec{ImageTag: srv.ImageTag, RuntimeClassName: srv.RuntimeClassName,
		Resources: runtime.Resources{CPU: srv.Resources.CPU, Memory: srv.Resources.Memory}}
}

// checkQuotas refuses, inside tx, a new sandbox for owner taking disk
// bytes when the owner's live servers already reach the server quota or
// would pass the disk quota with it: 429 naming the quota, the use and
// what is asked.
func (s *Service) checkQuotas(ctx context.Context, tx pgx.Tx, ownerID string, disk int64) error {
	// A server started before its disk was recorded counts as one now.
	u, err := store.LiveUsage(ctx, tx, ownerID, s.sandboxDisk(runtime.Spec{}))
	if err != nil {
		return err
	}
	if u.Servers >= s.cfg.MaxServersPerUser {
		return wire.Errorf(wire.CodeTooManyRequests, "server quota reached: %d of %d live servers; stop or finish-and-reuse one", u.Servers, s.cfg.MaxServersPerUser)
	}
	if disk > 0 && u.DiskBytes+disk > s.cfg.MaxDiskPerUser {
		return wire.Errorf(wire.CodeTooManyRequests, "disk quota reached: your %d live servers take %s of your %s disk quota, and a new server takes %s; stop or finish-and-reuse one",
			u.Servers, runtime.FormatBytes(u.DiskBytes), runtime.FormatBytes(s.cfg.MaxDiskPerUser), runtime.FormatBytes(disk))
	}
	return nil
}

// checkDiskQuota refuses a configuration in which no user could start
// a sandbox.
func (s *Service) checkDiskQuota() error {
	if one := s.sandboxDisk(runtime.Spec{}); one > s.cfg.MaxDiskPerUser {
		return fmt.Errorf("the disk quota per user (%s) is less than the %s one sandbox takes: no user could start one; raise --max-disk-per-user or lower the sandbox disk size",
			runtime.FormatBytes(s.cfg.MaxDiskPerUser), runtime.FormatBytes(one))
	}
	return nil
}

// DiskSpace reports the free space of the runtime's filesystem, for
// /readyz; false when the runtime keeps none of berth's.
func (s *Service) DiskSpace(ctx context.Context) (runtime.Space, bool, error) {
	r, ok := runtime.As[runtime.SpaceReporter](s.rt)
	if !ok {
		return runtime.Space{}, false, nil
	}
	sp, err := r.Space(ctx)
	return sp, true, err
}

// diskLow says whether the runtime refuses new sandboxes for lack of
// space now: the warm pool waits rather than fail a start each round.
func (s *Service) diskLow(ctx context.Context) bool {
	sp, ok, err := s.DiskSpace(ctx)
	return ok && err == nil && sp.Low
}
