package orchestrator

import (
	"context"

	"github.com/berth-mcp/berth/internal/rbac"
)

// SetTaskTTL records the ttl, in ms, granted p's operation id as an MCP
// task, so that every replica's tasks/get reports the ttl its tools/call
// granted. Only the operation's owner, who just created it, may.
func (s *Service) SetTaskTTL(ctx context.Context, p rbac.Principal, id string, ttlMs int64) error {
	return s.store.SetOperationTaskTTL(ctx, id, p.UserID, ttlMs)
}
