//go:build !linux

package local

import (
	"fmt"
	goruntime "runtime"

	"github.com/berth-mcp/berth/internal/runtime"
)

// Open refuses: the local runtime confines sandboxes with Linux
// namespaces, cgroups and seccomp, and there is no weaker fallback.
func Open(Options) (runtime.Runtime, error) {
	return nil, fmt.Errorf("the local runtime needs Linux (namespaces, cgroups and seccomp confine each sandbox) and this berth is built for %s/%s: run berth serve on Linux, or pass --runtime kubernetes", goruntime.GOOS, goruntime.GOARCH)
}
