package kubetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// home is the container's HOME: its own folder, so a program writing
// there does not write into the test user's home.
func (c *container) home() string { return filepath.Join(c.w.dir, "containers", c.spec.Name, "home") }

// root is the working directory of a container that names none (an
// image's WORKDIR does not exist here).
func (c *container) root() string { return filepath.Join(c.w.dir, "containers", c.spec.Name, "root") }

// start begins attempt of the container: it resolves the image, the
// environment and the command line, rewrites container paths to host
// paths and starts the process with its output going to the attempt's log.
func (c *container) start(ctx context.Context, attempt int) (proc, error) {
	w := c.w
	pod := w.latest()
	kind, img := w.k.images.resolve(c.spec.Image)
	env, err := w.containerEnv(ctx, pod, c)
	if err != nil {
		return nil, err
	}
	rw, err := c.rewriter(env, img)
	if err != nil {
		return nil, err
	}
	argv := commandLine(c.spec, img, env.values)
	for _, d := range []string{c.home(), c.root()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("container %s: %w", c.spec.Name, err)
		}
	}
	out, err := c.logs.open(attempt)
	if err != nil {
		return nil, err
	}
	var p proc
	switch kind {
	case imageKaniko:
		run := KanikoRun{Namespace: pod.Namespace, Pod: pod.Name, Container: c.spec.Name, Args: argv, Env: env.values}
		p = startBuiltin(ctx, pod.Name+"/"+c.spec.Name, func(ctx context.Context) int {
			return w.k.kaniko.build(ctx, run, rw, out)
		})
	default:
		if kind == imagePause {
			argv = []string{"sleep", "infinity"}
		}
		if len(argv) == 0 {
			out.finish()
			return nil, fmt.Errorf("container %s: no command specified, and kubetest knows no entrypoint for image %q (Kubelet.AddImage)", c.spec.Name, c.spec.Image)
		}
		for i := range argv {
			argv[i] = rw.rewrite(argv[i])
		}
		envv := env.environ(rw.rewrite)
		bin, err := lookPath(argv[0], env.values["PATH"])
		if err != nil {
			out.finish()
			return nil, fmt.Errorf("failed to create containerd task: failed to create shim task: OCI runtime create failed: exec: %q: %w", argv[0], err)
		}
		dir := c.root()
		if c.spec.WorkingDir != "" {
			dir = rw.rewrite(c.spec.WorkingDir)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				out.finish()
				return nil, fmt.Errorf("container %s: workingDir: %w", c.spec.Name, err)
			}
		}
		cmd := exec.Command(bin, argv[1:]...)
		cmd.Args[0] = argv[0]
		cg, err := c.memoryCgroup(attempt)
		if err != nil {
			out.finish()
			return nil, err
		}
		if cg != nil {
			// The process enters its group before it runs the program, so
			// nothing it starts escapes the limit.
			cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, cg.procs(), bin}, argv[1:]...)...)
		}
		cmd.Env, cmd.Dir = envv, dir
		cmd.Stdout, cmd.Stderr = out, out
		op, err := startOSProc(cmd, cg, w.k.janitor)
		if err != nil {
			if cg != nil {
				cg.remove()
			}
			out.finish()
			return nil, fmt.Errorf("start container %s: %w", c.spec.Name, err)
		}
		p = op
	}
	go func() {
		<-p.done()
		out.finish()
	}()
	return p, nil
}

// memoryCgroup makes the attempt's memory cgroup when the container has
// a memory limit and the host allows cgroups; nil otherwise.
func (c *container) memoryCgroup(attempt int) (*memCgroup, error) {
	lim := c.spec.Resources.Limits.Memory()
	if c.w.k.mem == nil || lim == nil || lim.IsZero() {
		return nil, nil
	}
	return c.w.k.mem.create(fmt.Sprintf("%s-%s-%d", c.w.uid, c.spec.Name, attempt), lim.Value())
}

// commandLine is the container's argv as a container runtime builds it
// from the pod's command and args and the image's entrypoint and cmd,
// with $(VAR) references expanded.
func commandLine(spec corev1.Container, img Image, vars map[string]string) []string {
	var argv []string
	switch {
	case len(spec.Command) > 0:
		argv = append(argv, spec.Command...)
		argv = append(argv, spec.Args...)
	case len(spec.Args) > 0:
		argv = append(append(argv, img.Entrypoint...), spec.Args...)
	default:
		argv = append(append(argv, img.Entrypoint...), img.Cmd...)
	}
	for i := range argv {
		argv[i] = expand(argv[i], vars)
	}
	return argv
}

// rewriter maps the container's mount paths and its image's files.
func (c *container) rewriter(env *envList, img Image) (*rewriter, error) {
	w := c.w
	w.mu.Lock()
	vols := maps.Clone(w.volumes)
	w.mu.Unlock()
	var mounts, files []pathPair
	for _, m := range c.spec.VolumeMounts {
		host, ok := vols[m.Name]
		if !ok {
			return nil, &configError{fmt.Errorf("volume %q of mount %s is not set up", m.Name, m.MountPath)}
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expand(m.SubPathExpr, env.values)
		}
		if sub != "" {
			if filepath.IsAbs(sub) || strings.HasPrefix(filepath.Clean(sub), "..") {
				return nil, &configError{fmt.Errorf("subPath %q of mount %s must be a relative path within the volume", sub, m.MountPath)}
			}
			host = filepath.Join(host, sub)
			// As a kubelet does, a missing subPath becomes a folder.
			if _, err := os.Stat(host); errors.Is(err, os.ErrNotExist) {
				if err := os.MkdirAll(host, 0o755); err != nil {
					return nil, fmt.Errorf("subPath %s: %w", sub, err)
				}
			}
		}
		mounts = append(mounts, pathPair{from: m.MountPath, to: host})
	}
	for from, to := range img.Files {
		files = append(files, pathPair{from: from, to: to})
	}
	return newRewriter(mounts, files), nil
}

// lookPath finds file in the container's PATH, as exec would.
func lookPath(file, path string) (string, error) {
	if strings.Contains(file, "/") {
		if err := executable(file); err != nil {
			return "", err
		}
		return file, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, file)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: permission denied", p)
	}
	return nil
}
