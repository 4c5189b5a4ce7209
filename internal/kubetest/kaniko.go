package kubetest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// KanikoRun is one Kaniko build the kubelet pretended to run: a container
// whose image names Kaniko (Options.KanikoImage) records what it was asked
// to build and exits instead of building.
type KanikoRun struct {
	Namespace, Pod, Container string
	// Args is the container's command line as the pod gave it ($(VAR)
	// expanded, container paths not rewritten), e.g.
	// --dockerfile=/workspace/Dockerfile --destination=registry/x:tag.
	Args []string
	// Env is the container's environment.
	Env map[string]string
	// Dockerfile is the content of the Dockerfile the arguments point at
	// (--dockerfile, relative to --context, default "Dockerfile"), read
	// through the container's mounts; DockerfileError says why it could
	// not be read.
	Dockerfile, DockerfileError string
	// Destinations are the --destination values.
	Destinations []string
	// DockerConfig is /kaniko/.docker/config.json as the container would
	// see it (registry credentials from a mounted Secret), "" when absent.
	DockerConfig string
	// ExitCode is what the build exited with (Kubelet.SetKanikoExit).
	ExitCode int
}

// kanikoRecorder keeps the runs and the exit code builds end with.
type kanikoRecorder struct {
	mu       sync.Mutex
	exitCode int
	runs     []KanikoRun
}

// KanikoRuns returns the Kaniko builds run so far, oldest first.
func (k *Kubelet) KanikoRuns() []KanikoRun {
	k.kaniko.mu.Lock()
	defer k.kaniko.mu.Unlock()
	return append([]KanikoRun(nil), k.kaniko.runs...)
}

// SetKanikoExit sets the exit code of Kaniko builds started from now on:
// 0 (the default) succeeds, anything else fails the build.
func (k *Kubelet) SetKanikoExit(code int) {
	k.kaniko.mu.Lock()
	defer k.kaniko.mu.Unlock()
	k.kaniko.exitCode = code
}

// build records run, reading its Dockerfile through rw, writes a log like
// Kaniko's and returns the exit code.
func (r *kanikoRecorder) build(ctx context.Context, run KanikoRun, rw *rewriter, log io.Writer) int {
	run.Env = maps.Clone(run.Env)
	flags := kanikoFlags(run.Args)
	ctxDir := strings.TrimPrefix(flags["context"][0], "dir://")
	dockerfile := flags["dockerfile"][0]
	if !filepath.IsAbs(dockerfile) {
		dockerfile = filepath.Join(ctxDir, dockerfile)
	}
	if b, err := os.ReadFile(rw.rewrite(dockerfile)); err == nil {
		run.Dockerfile = string(b)
	} else {
		run.DockerfileError = err.Error()
	}
	run.Destinations = flags["destination"]
	if b, err := os.ReadFile(rw.rewrite("/kaniko/.docker/config.json")); err == nil {
		run.DockerConfig = string(b)
	}
	r.mu.Lock()
	run.ExitCode = r.exitCode
	if run.DockerfileError != "" && run.ExitCode == 0 {
		run.ExitCode = 1
	}
	r.runs = append(r.runs, run)
	r.mu.Unlock()

	fmt.Fprintf(log, "INFO[0000] kubetest stand-in for Kaniko: building %s from %s\n", strings.Join(run.Destinations, ", "), dockerfile)
	switch {
	case run.DockerfileError != "":
		fmt.Fprintf(log, "Error: error resolving dockerfile path: please provide a valid path to a Dockerfile within the build context with --dockerfile: %s\n", run.DockerfileError)
	case run.ExitCode != 0:
		fmt.Fprintf(log, "error building image: kubetest: build told to fail with exit code %d\n", run.ExitCode)
	default:
		for _, d := range run.Destinations {
			fmt.Fprintf(log, "INFO[0001] Pushing image to %s\nINFO[0002] Pushed %s\n", d, d)
		}
	}
	if ctx.Err() != nil {
		return 143 // stopped as by SIGTERM
	}
	return run.ExitCode
}

// kanikoFlags parses Kaniko's long flags, --name=value or --name value
// (and -f, -c, -d), with Kaniko's defaults for context and dockerfile.
func kanikoFlags(args []string) map[string][]string {
	short := map[string]string{"f": "dockerfile", "c": "context", "d": "destination"}
	out := map[string][]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name := strings.TrimLeft(a, "-")
		val, hasVal := "", false
		if n, v, ok := strings.Cut(name, "="); ok {
			name, val, hasVal = n, v, true
		}
		if long, ok := short[name]; ok {
			name = long
		}
		if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			val = args[i+1]
			i++
		}
		out[name] = append(out[name], val)
	}
	if len(out["context"]) == 0 {
		out["context"] = []string{"/workspace"}
	}
	if len(out["dockerfile"]) == 0 {
		out["dockerfile"] = []string{"Dockerfile"}
	}
	return out
}
