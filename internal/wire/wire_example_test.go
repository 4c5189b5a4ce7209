package wire_test

import (
	"fmt"

	"github.com/berth-mcp/berth/internal/wire"
)

// A deep function says what kind of failure it has; callers add context
// with ordinary wrapping, and the HTTP layer still finds the status.
func ExampleErrorf() {
	err := wire.Errorf(wire.CodeNotFound, "server %q not found", "s-1")
	err = fmt.Errorf("stop server: %w", err)

	d := wire.DetailOf(err)
	fmt.Println(d.Code, wire.StatusOf(d.Code))
	fmt.Println(d.Message)
	// Output:
	// not_found 404
	// stop server: server "s-1" not found
}
