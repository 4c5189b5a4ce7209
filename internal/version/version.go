// Package version holds the build version of the berth binaries, set at
// link time by the Makefile.
package version

// Version is overwritten by -ldflags "-X ...Version=..." in `make build`.
var Version = "dev"
