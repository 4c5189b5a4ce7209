// Package version holds the version of the berth binaries: the release
// this source tree makes (Release, which server.json, the MCP registry
// entry, must name) and the version a binary reports, which the Makefile
// sets at link time.
package version

// Release is the version this source tree is released as. A release
// build reports exactly this; `make release` refuses a tree whose
// server.json names another.
const Release = "0.2.0"

// Version is what a binary reports: Release for a release build, or
// Release with a development suffix (the commit) from `make build`;
// "-X ...Version=..." in the Makefile sets it. A plain `go build` says
// Release+dev.
var Version = Release + "+dev"
