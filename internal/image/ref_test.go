//go:build linux

package image

import (
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

func TestNormalize(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	for in, want := range map[string]string{
		"python:3.12":                   "docker.io/library/python:3.12",
		"python":                        "docker.io/library/python:latest",
		"library/python:3.12":           "docker.io/library/python:3.12",
		"docker.io/python:3.12":         "docker.io/library/python:3.12",
		"someone/tool":                  "docker.io/someone/tool:latest",
		"ghcr.io/org/app:v1":            "ghcr.io/org/app:v1",
		"localhost:5000/app":            "localhost:5000/app:latest",
		"127.0.0.1:5000/a/b/c:t":        "127.0.0.1:5000/a/b/c:t",
		"python@" + d:                   "docker.io/library/python@" + d,
		"python:3.12@" + d:              "docker.io/library/python@" + d,
		"registry.example.com/x:y@" + d: "registry.example.com/x@" + d,
	} {
		got, err := Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", " python", "Python:3", "python:", "a//b", "python@sha256:abc", strings.Repeat("a", 600),
		"../etc", "python:3.12 ", "x:y:z"} {
		got, err := Normalize(in)
		if err == nil {
			t.Errorf("Normalize(%q) = %q, want an error", in, got)
			continue
		}
		if d := wire.DetailOf(err); d.Code != wire.CodeBadRequest {
			t.Errorf("Normalize(%q): %v is %s, want bad_request", in, err, d.Code)
		}
	}
}

func TestWithDigest(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for in, want := range map[string]string{
		"python:3.12":                               "docker.io/library/python@" + d,
		"localhost:5000/team/app:v1":                "localhost:5000/team/app@" + d,
		"python@sha256:" + strings.Repeat("cd", 32): "docker.io/library/python@" + d,
	} {
		if got, err := WithDigest(in, d); err != nil || got != want {
			t.Errorf("WithDigest(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := WithDigest("python:3.12", "sha256:abc"); err == nil {
		t.Errorf("WithDigest with a short digest = %q, want an error", got)
	}
}

// TestRemoteRefPlainHTTP: a registry the operator lists as plain HTTP is
// spoken to over HTTP whatever its name; any other over HTTPS, but for
// loopback, which go-containerregistry picks HTTP for (and the transport
// then refuses unless listed).
func TestRemoteRefPlainHTTP(t *testing.T) {
	for _, tc := range []struct {
		ref, scheme string
		plain       []string
	}{
		{"registry.example:5000/team/app:1", "http", []string{"registry.example:5000"}},
		{"registry.example:5000/team/app:1", "https", nil},
		{"registry.example:5000/team/app:1", "https", []string{"other.example:5000"}},
		{"python:3.12", "https", []string{"registry.example:5000"}},
	} {
		named, err := parse(tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		r, err := remoteRef(named, tc.plain)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Context().Registry.Scheme(); got != tc.scheme {
			t.Errorf("%s with plain HTTP %v: %s, want %s", tc.ref, tc.plain, got, tc.scheme)
		}
	}
}
