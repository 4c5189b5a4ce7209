package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRegistryFlags: --insecure-registry takes host:port, warns of a
// registry off loopback, and refuses one berth has credentials for;
// --registry-auth-file's credentials reach the runtime and the file is
// hidden from sandboxes.
func TestRegistryFlags(t *testing.T) {
	auth := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(auth, []byte(`{"auths":{"registry.example:5000":{"auth":"cm9ib3Q6c2VjcmV0"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	f := sandboxFlags{pids: 10, registryAuthFile: auth, imageCacheSize: "5Gi", insecureRegistries: []string{"127.0.0.1:5000", "Mirror.Internal:5000"}}
	opts, err := f.options(t.TempDir(), nil, log)
	if err != nil {
		t.Fatal(err)
	}
	if opts.ImageCacheBytes != 5<<30 || !slices.Equal(opts.PlainHTTPRegistries, []string{"127.0.0.1:5000", "mirror.internal:5000"}) ||
		!slices.Equal(opts.RegistryCredentials.Registries(), []string{"registry.example:5000"}) || !slices.Contains(opts.HidePaths, auth) {
		t.Fatalf("options: cache %d, plain HTTP %v, credentials %v, hidden %v", opts.ImageCacheBytes, opts.PlainHTTPRegistries,
			opts.RegistryCredentials, opts.HidePaths)
	}
	if !strings.Contains(logs.String(), "mirror.internal:5000") || strings.Contains(logs.String(), "127.0.0.1:5000") {
		t.Fatalf("warnings: %s; want one for the registry off loopback only", logs.String())
	}
	if strings.Contains(logs.String(), "secret") || strings.Contains(logs.String(), "cm9ib3Q6c2VjcmV0") {
		t.Fatalf("the log shows a credential: %s", logs.String())
	}
	for _, bad := range []string{"registry.example:5000", "http://x:5000", "noport", "a/b:1"} {
		f.insecureRegistries = []string{bad}
		if _, err := f.options(t.TempDir(), nil, log); err == nil {
			t.Errorf("--insecure-registry %s was accepted", bad)
		} else {
			t.Logf("--insecure-registry %s: %v", bad, err)
		}
	}
}
