//go:build linux

package local_test

import (
	"testing"

	"github.com/berth-mcp/berth/internal/image/imagetest"
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

// TestConformanceInImage runs them on sandboxes of an OCI image; its
// sandbox that cannot start is one of an image the registry lacks.
func TestConformanceInImage(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	runtimetest.Conformance(t, runtimetest.Target{
		Runtime:       imageRuntime(t, dataDir(t), reg),
		Image:         toolsImage(t, reg),
		Failing:       runtime.Spec{ImageTag: reg.Host + "/missing:1"},
		FailingReason: "no such image",
	})
}
