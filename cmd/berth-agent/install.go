package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// installCommand is the first argument that makes berth-agent copy
// itself into a directory: the init container of a Kubernetes sandbox
// runs it from the agent image, so that any image with bash can run the
// agent from a shared volume.
const installCommand = "install"

// install copies the running executable to dir/berth-agent, atomically.
func install(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".berth-agent-")
	if err != nil {
		return fmt.Errorf("install into %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("install into %s: %w", dir, err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return fmt.Errorf("install into %s: %w", dir, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install into %s: %w", dir, err)
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, "berth-agent"))
}
