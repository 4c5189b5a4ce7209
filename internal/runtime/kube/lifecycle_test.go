package kube_test

import (
	"testing"

	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/runtime/runtimetest"
)

// TestLifecycleThroughBerth takes a server through every IdeGYM lifecycle
// tool over REST and MCP with the orchestrator on this runtime.
func TestLifecycleThroughBerth(t *testing.T) {
	rt, ns := newNodeRuntime(t, kube.Options{})
	e := orchtest.NewOn(t, rt, orchestrator.Config{DefaultNamespace: ns, Logger: orchtest.Logger(t)})
	runtimetest.Lifecycle(t, e.Svc, sandboxImage)
}
