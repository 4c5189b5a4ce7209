package main

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/berth-mcp/berth/internal/image"
	"github.com/berth-mcp/berth/internal/runtime/local"
)

// sandboxFlags configure the local runtime's sandboxes.
type sandboxFlags struct {
	agentBinary string
	isolation   string
	memory      string
	pids        int64
	cpus        string
	disk        string
	reserve     string
	tmp         string
	readOnly    []string
	uidRegistry string
	// OCI images of the local runtime.
	imageCacheSize     string
	registryAuthFile   string
	insecureRegistries []string
}

func (f *sandboxFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.agentBinary, "agent-binary", "", "berth-agent executable for the local runtime (default: next to berth, then PATH)")
	fl.StringVar(&f.isolation, "isolation", local.IsolationFull, "local runtime isolation: full (every sandbox confined; berth refuses to start if it cannot) or none (sandboxes run unconfined as berth's user)")
	fl.StringVar(&f.memory, "sandbox-memory", "2Gi", "memory limit of each sandbox (start_server resources.memory overrides it)")
	fl.Int64Var(&f.pids, "sandbox-pids", local.DefaultPids, "process limit of each sandbox")
	fl.StringVar(&f.cpus, "sandbox-cpus", "", "CPU limit of each sandbox, e.g. 2 or 500m (default unlimited; resources.cpu overrides it)")
	fl.StringVar(&f.disk, "sandbox-disk", "10Gi", "size of each sandbox's workspace volume, allocated whole on the data directory's filesystem when the sandbox is made")
	fl.StringVar(&f.reserve, "data-dir-reserve", "2Gi", "free space kept in the data directory for berth (its database, logs) and the sandboxes it runs: no sandbox volume, image or unconfined sandbox is made that would leave less, and /readyz, the metrics and the log report falling below it")
	fl.StringVar(&f.tmp, "sandbox-tmp", "512Mi", "size of each sandbox's /tmp and of its /dev/shm")
	fl.StringSliceVar(&f.readOnly, "sandbox-read-only", local.DefaultReadOnlyPaths, "host paths sandboxes see, read-only")
	fl.StringVar(&f.uidRegistry, "uid-registry", local.DefaultUIDRegistry, "directory where every berth on this host claims sandbox uid blocks")
	fl.StringVar(&f.imageCacheSize, "image-cache-size", "20Gi", "size of the local runtime's cache of OCI images (<data-dir>/image-cache): past it, the least recently used images no sandbox uses are removed")
	fl.StringVar(&f.registryAuthFile, "registry-auth-file", "", "docker config file (the auths of ~/.docker/config.json, as docker login writes it) with the credentials berth pulls images with (and pushes the images it builds with, see --image-registry); sandboxes never see them")
	fl.StringSliceVar(&f.insecureRegistries, "insecure-registry", nil, "registries (host:port, repeatable) berth pulls from over plain HTTP, such as one on loopback; every other is HTTPS only. berth warns for one off loopback and refuses one it has credentials for")
}

// options turns the flags into the local runtime's options; hide are
// files of berth's that sandboxes must not see even where the host
// system they see holds them.
func (f *sandboxFlags) options(dataDir string, hide []string, log *slog.Logger) (local.Options, error) {
	opts := local.Options{
		DataDir: dataDir, AgentBinary: f.agentBinary, Isolation: f.isolation, Logger: log,
		ReadOnlyPaths: f.readOnly, HidePaths: hide, UIDRegistry: f.uidRegistry,
		Limits: local.Limits{Pids: f.pids},
	}
	if f.pids <= 0 {
		return opts, fmt.Errorf("--sandbox-pids %d: want a positive number", f.pids)
	}
	if err := f.registryOptions(&opts, log); err != nil {
		return opts, err
	}
	var err error
	for _, q := range []struct {
		flag, value string
		into        *int64
		milli       bool
	}{
		{"--sandbox-memory", f.memory, &opts.Limits.MemoryBytes, false},
		{"--sandbox-cpus", f.cpus, &opts.Limits.MilliCPU, true},
		{"--sandbox-disk", f.disk, &opts.Limits.DiskBytes, false},
		{"--data-dir-reserve", f.reserve, &opts.Reserve, false},
		{"--sandbox-tmp", f.tmp, &opts.Limits.TmpBytes, false},
		{"--image-cache-size", f.imageCacheSize, &opts.ImageCacheBytes, false},
	} {
		if q.value == "" {
			continue
		}
		if *q.into, err = quantity(q.flag, q.value, q.milli); err != nil {
			return opts, err
		}
	}
	return opts, nil
}

func quantity(flag, value string, milli bool) (int64, error) {
	q, err := resource.ParseQuantity(value)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("%s %q: want a positive quantity such as 512Mi, 2Gi or 500m", flag, value)
	}
	if milli {
		return q.MilliValue(), nil
	}
	return q.Value(), nil
}

// registryOptions reads the registry credentials and checks the plain
// HTTP registries: one off loopback is warned of (its images travel
// unauthenticated), one berth would send credentials to is refused.
func (f *sandboxFlags) registryOptions(opts *local.Options, log *slog.Logger) error {
	if f.registryAuthFile != "" {
		creds, err := image.LoadDockerConfig(f.registryAuthFile)
		if err != nil {
			return fmt.Errorf("--registry-auth-file: %w", err)
		}
		opts.RegistryCredentials = creds
		// It may sit under a path sandboxes of the host system see.
		opts.HidePaths = append(opts.HidePaths, f.registryAuthFile)
	}
	withCreds := opts.RegistryCredentials.Registries()
	for _, reg := range f.insecureRegistries {
		host, port, err := net.SplitHostPort(reg)
		if err != nil || host == "" || port == "" || strings.ContainsAny(reg, "/@ ") {
			return fmt.Errorf("--insecure-registry %q: want host:port, as image references name a registry", reg)
		}
		reg = strings.ToLower(reg)
		if slices.Contains(withCreds, reg) {
			return fmt.Errorf("--insecure-registry %s: berth has credentials for it (--registry-auth-file), which plain HTTP would send unencrypted; serve it over HTTPS", reg)
		}
		if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && host != "localhost" {
			log.Warn("a registry is reached over plain HTTP: its images could be changed on the way (their digests are still checked against the manifest, which could be changed too)", "registry", reg)
		}
		opts.PlainHTTPRegistries = append(opts.PlainHTTPRegistries, reg)
	}
	return nil
}
