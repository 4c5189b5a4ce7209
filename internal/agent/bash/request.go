package bash

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// plan is a validated BashRequest turned into what the process needs.
type plan struct {
	timeout  time.Duration
	grace    time.Duration
	limit    int64 // per stream; negative means unlimited
	dir      string
	cwd      string // as the caller gave it, for messages: dir may be a host path
	env      []string
	cred     *credential
	strip    bool
	commands string
}

func (r *Runner) plan(req wire.BashRequest) (*plan, error) {
	if err := req.Check(); err != nil {
		return nil, err
	}
	p := &plan{strip: req.StripOutput, commands: req.Command, cwd: req.Cwd}
	var err error
	if p.timeout, err = wire.Seconds("command_timeout", req.CommandTimeout, wire.DefaultCommandTimeoutSeconds, false); err != nil {
		return nil, err
	}
	if p.grace, err = wire.Seconds("graceful_termination_timeout", req.GracefulTerminationTimeout, wire.DefaultGracefulTerminationSeconds, true); err != nil {
		return nil, err
	}
	p.limit = req.MaxOutputBytes.Limit(wire.DefaultMaxOutputBytes)
	if p.dir, err = r.dir(req.Cwd); err != nil {
		return nil, err
	}
	if req.User == "" && r.User != "" {
		p.cred, err = lookupImageUser(r.User, os.Geteuid())
	} else {
		p.cred, err = lookupCredential(req.User, os.Geteuid())
	}
	if err != nil {
		return nil, err
	}
	p.env = r.environ(req.Env, p.cred)
	return p, nil
}

// dir resolves the request's cwd against the workspace and checks that it
// is a directory, so that a typo is a clear 400 instead of a failed start.
func (r *Runner) dir(cwd string) (string, error) {
	dir := cwd
	switch {
	case cwd == "" && r.Dir != "":
		dir = r.Dir
	case cwd == "":
		dir = r.Workspace
	case !filepath.IsAbs(cwd) && r.Workspace != "":
		dir = filepath.Join(r.Workspace, cwd)
	}
	if dir == "" {
		return "", nil
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", wire.Errorf(wire.CodeBadRequest, "cwd %q does not exist", cwd)
	case err != nil:
		return "", wire.Errorf(wire.CodeBadRequest, "cwd %q: %w", cwd, pathless(err))
	case !fi.IsDir():
		return "", wire.Errorf(wire.CodeBadRequest, "cwd %q is not a directory", cwd)
	}
	return dir, nil
}

// pathless is err without the path a *fs.PathError names: the resolved
// directory, which with no isolation is a host path the caller must not
// learn.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// environ merges the request's variables over the base environment. The
// identity variables of a switched user come between the two, so a caller
// can still override them explicitly.
func (r *Runner) environ(extra map[string]string, cred *credential) []string {
	base := r.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	over := make(map[string]string, len(extra)+3)
	if cred != nil {
		over["HOME"], over["USER"], over["LOGNAME"] = cred.home, cred.name, cred.name
	}
	// Names and values were checked with the request (BashRequest.Check).
	maps.Copy(over, extra)
	env := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, replaced := over[name]; !replaced {
			env = append(env, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(over)) {
		env = append(env, k+"="+over[k])
	}
	return env
}
