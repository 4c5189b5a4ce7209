//go:build linux

package local_test

import (
	"testing"

	"github.com/berth-mcp/berth/internal/image/imagetest"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/runtime/local"
	"github.com/berth-mcp/berth/internal/runtime/runtimetest"
)

// TestLifecycleThroughBerth takes a server through every IdeGYM lifecycle
// tool over REST and MCP with the orchestrator on this runtime.
func TestLifecycleThroughBerth(t *testing.T) {
	e := orchtest.New(t, agentBin, orchestrator.Config{Logger: orchtest.Logger(t)})
	runtimetest.Lifecycle(t, e.Svc, "base")
}

// TestLifecycleInImage does the same with a server of an OCI image.
func TestLifecycleInImage(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	rt := orchtest.NewRuntimeWith(t, local.Options{DataDir: orchtest.DataDir(t), AgentBinary: agentBin, PlainHTTPRegistries: []string{reg.Host},
		Logger: orchtest.Logger(t)})
	e := orchtest.NewOn(t, rt, orchestrator.Config{Logger: orchtest.Logger(t)})
	runtimetest.Lifecycle(t, e.Svc, toolsImage(t, reg))
}
