//go:build linux

package local

import "github.com/berth-mcp/berth/internal/runtime"

// Open is New behind the runtime interface, for callers built on every
// platform.
func Open(opts Options) (runtime.Runtime, error) {
	rt, err := New(opts)
	if err != nil {
		return nil, err
	}
	return rt, nil
}
