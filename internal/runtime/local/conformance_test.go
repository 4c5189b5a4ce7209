//go:build linux

package local_test

import (
	"testing"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/runtimetest"
)

// TestConformance runs the tests every runtime must pass on the local
// runtime. Its sandbox that cannot start is one whose memory limit is
// too small for its agent.
func TestConformance(t *testing.T) {
	runtimetest.Conformance(t, runtimetest.Target{
		Runtime:       newRuntime(t, dataDir(t)),
		Image:         "base",
		Failing:       runtime.Spec{ImageTag: "base", Resources: runtime.Resources{Memory: "1Mi"}},
		FailingReason: "memory limit",
	})
}
