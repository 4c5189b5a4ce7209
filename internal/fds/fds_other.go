//go:build !linux

package fds

// CloseInherited does nothing: only Linux sandboxes rely on it, and
// listing a process's descriptors differs from system to system.
func CloseInherited(keep ...int) error { return nil }

// CloseOnExecFrom does nothing, as CloseInherited.
func CloseOnExecFrom(first int) error { return nil }
