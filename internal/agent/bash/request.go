package bash

import (
	"errors"
	"io/fs"
	"maps"
	"math"
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
	env      []string
	cred     *credential
	strip    bool
	commands string
}

// maxSeconds caps timeouts so that huge values cannot overflow a Duration;
// 100 years is as good as forever for a command.
const maxSeconds = 100 * 365 * 24 * 3600

func (r *Runner) plan(req wire.BashRequest) (*plan, error) {
	if strings.TrimSpace(req.Command) == "" {
		return nil, wire.Errorf(wire.CodeBadRequest, "command is required and must not be empty")
	}
	p := &plan{strip: req.StripOutput, commands: req.Command}
	var err error
	if p.timeout, err = seconds("command_timeout", req.CommandTimeout, wire.DefaultCommandTimeoutSeconds, false); err != nil {
		return nil, err
	}
	if p.grace, err = seconds("graceful_termination_timeout", req.GracefulTerminationTimeout, wire.DefaultGracefulTerminationSeconds, true); err != nil {
		return nil, err
	}
	if m := req.MaxOutputBytes; m.Set && !m.Null && m.Value < 0 {
		return nil, wire.Errorf(wire.CodeBadRequest, "max_output_bytes must be >= 0 or null for no limit, got %d", m.Value)
	}
	p.limit = req.MaxOutputBytes.Limit(wire.DefaultMaxOutputBytes)
	if p.dir, err = r.dir(req.Cwd); err != nil {
		return nil, err
	}
	if p.cred, err = lookupCredential(req.User, os.Geteuid()); err != nil {
		return nil, err
	}
	if p.env, err = r.environ(req.Env, p.cred); err != nil {
		return nil, err
	}
	return p, nil
}

// seconds turns an optional JSON seconds field into a Duration. zeroOK
// tells whether 0 is allowed (a grace period may be 0, a timeout not).
func seconds(field string, v *float64, def float64, zeroOK bool) (time.Duration, error) {
	s := def
	if v != nil {
		s = *v
	}
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return 0, wire.Errorf(wire.CodeBadRequest, "%s must be a finite number of seconds", field)
	case s < 0 || (s == 0 && !zeroOK):
		if zeroOK {
			return 0, wire.Errorf(wire.CodeBadRequest, "%s must be >= 0 seconds, got %g", field, s)
		}
		return 0, wire.Errorf(wire.CodeBadRequest, "%s must be > 0 seconds, got %g", field, s)
	}
	return time.Duration(min(s, maxSeconds) * float64(time.Second)), nil
}

// dir resolves the request's cwd against the workspace and checks that it
// is a directory, so that a typo is a clear 400 instead of a failed start.
func (r *Runner) dir(cwd string) (string, error) {
	dir := cwd
	switch {
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
		return "", wire.Errorf(wire.CodeBadRequest, "cwd %q: %w", cwd, err)
	case !fi.IsDir():
		return "", wire.Errorf(wire.CodeBadRequest, "cwd %q is not a directory", cwd)
	}
	return dir, nil
}

// environ merges the request's variables over the base environment. The
// identity variables of a switched user come between the two, so a caller
// can still override them explicitly.
func (r *Runner) environ(extra map[string]string, cred *credential) ([]string, error) {
	base := r.BaseEnv
	if base == nil {
		base = os.Environ()
	}
	over := make(map[string]string, len(extra)+3)
	if cred != nil {
		over["HOME"], over["USER"], over["LOGNAME"] = cred.home, cred.name, cred.name
	}
	for k, v := range extra {
		if !validName(k) {
			return nil, wire.Errorf(wire.CodeBadRequest, "env: %q is not a valid variable name", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, wire.Errorf(wire.CodeBadRequest, "env: value of %s contains a NUL byte", k)
		}
		over[k] = v
	}
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
	return env, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
