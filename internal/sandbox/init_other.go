//go:build !linux

package sandbox

import (
	"errors"
	"io"
)

// Init fails: local sandboxes are built from Linux namespaces.
func Init(io.Writer) error {
	return errors.New("sandbox init needs Linux namespaces; this berth-agent was built for another system")
}
