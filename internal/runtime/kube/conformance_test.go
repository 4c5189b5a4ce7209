package kube_test

import (
	"testing"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/runtime/runtimetest"
)

// TestConformance runs the tests every runtime must pass against a real
// API server, as berth's ServiceAccount with the shipped Role. Its sandbox
// that cannot start has an image that cannot be pulled.
func TestConformance(t *testing.T) {
	rt, ns := newNodeRuntime(t, kube.Options{})
	runtimetest.Conformance(t, runtimetest.Target{
		Runtime: rt, Image: sandboxImage, Namespace: ns,
		Failing:       runtime.Spec{ImageTag: missingImage},
		FailingReason: missingImage,
	})
}
