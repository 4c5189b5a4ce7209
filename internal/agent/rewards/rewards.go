// Package rewards runs a sandbox's test command and turns the JUnit XML
// reports it writes into pass/fail counts (POST /api/rewards/test): the
// reward signal for an agent's work in the workspace.
package rewards

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/berth-mcp/berth/internal/agent/bash"
	"github.com/berth-mcp/berth/internal/wire"
)

// Runner runs test commands and reads their JUnit reports.
type Runner struct {
	Bash           *bash.Runner
	DefaultCommand string   // the agent's --test-command
	DefaultReports []string // globs used when a request names none
	Workspace      string   // "" = Bash.Workspace
}

// discoverGlob is searched when neither the request nor the configuration
// names report globs; only files whose root is a JUnit element count.
const discoverGlob = "**/*.xml"

// Test runs the test command and sums the outcomes in the JUnit reports it
// wrote. Only reports created or changed during the run are read, so a
// stale report from an earlier run can never stand in for a run that
// wrote none. When the command ran but no report could be used, the
// result still carries the command's output next to the error.
func (r *Runner) Test(ctx context.Context, req wire.RewardRequest) (wire.RewardResult, error) {
	command := req.Command
	if strings.TrimSpace(command) == "" {
		command = r.DefaultCommand
	}
	if strings.TrimSpace(command) == "" {
		return wire.RewardResult{}, wire.Errorf(wire.CodeBadRequest, "no test command: pass `command` or configure --test-command")
	}
	if r.Bash == nil {
		return wire.RewardResult{}, errors.New("rewards: no bash runner configured")
	}
	ws, err := r.workspace()
	if err != nil {
		return wire.RewardResult{}, err
	}
	globs, discover := req.JUnitPaths, false
	if len(globs) == 0 {
		globs = r.DefaultReports
	}
	if len(globs) == 0 {
		globs, discover = []string{discoverGlob}, true
	}
	pats := make([]pattern, 0, len(globs))
	for _, g := range globs {
		p, err := compile(ws, g)
		if err != nil {
			return wire.RewardResult{}, err
		}
		pats = append(pats, p)
	}

	before, err := find(ws, pats)
	if err != nil {
		return wire.RewardResult{}, err
	}
	res, err := r.Bash.Run(ctx, wire.BashRequest{Command: command, CommandTimeout: req.CommandTimeout, Cwd: ws})
	if err != nil {
		return wire.RewardResult{}, fmt.Errorf("run test command: %w", err)
	}
	out := wire.RewardResult{Bash: res, Reports: []string{}}
	after, err := find(ws, pats)
	if err != nil {
		return out, err
	}

	var fresh []string
	for rel, st := range after {
		if old, ok := before[rel]; !ok || old != st {
			fresh = append(fresh, rel)
		}
	}
	sort.Strings(fresh)
	var total counts
	for _, rel := range fresh {
		c, err := readReport(filepath.Join(ws, filepath.FromSlash(rel)))
		if discover && errors.Is(err, errNotJUnit) {
			continue // some other XML file the run happened to write
		}
		if err != nil {
			return out, wire.Errorf(wire.CodeBadRequest, "JUnit report %s: %w", rel, err)
		}
		total.add(c)
		out.Reports = append(out.Reports, rel)
	}
	if len(out.Reports) == 0 {
		return out, noReport(globs, discover, len(after), res)
	}
	out.Total, out.Passed, out.Failed, out.Skipped, out.Errors = total.total, total.passed, total.failed, total.skipped, total.errors
	return out, nil
}

// noReport explains why there is nothing to count, pointing at the most
// likely cause.
func noReport(globs []string, discover bool, matched int, res wire.BashResult) error {
	what := "matching " + strings.Join(globs, ", ")
	if discover {
		what = "(any *.xml with a <testsuites> or <testsuite> root)"
	}
	var why string
	switch {
	case res.TimedOut:
		why = "; the test command timed out"
	case res.ExitCode != 0:
		why = fmt.Sprintf("; the test command exited with %d", res.ExitCode)
	}
	if matched > 0 && !discover {
		why += fmt.Sprintf("; %d matching file(s) were not written during this run", matched)
	}
	return wire.Errorf(wire.CodeNotFound, "no JUnit report %s was written during the run%s", what, why)
}

func readReport(file string) (counts, error) {
	f, err := os.Open(file)
	if err != nil {
		return counts{}, err
	}
	defer f.Close()
	c, err := parseJUnit(f)
	if err != nil {
		return counts{}, fmt.Errorf("not a valid JUnit XML report: %w", err)
	}
	return c, nil
}

// workspace returns the workspace with symbolic links resolved, so that
// containment checks compare real paths.
func (r *Runner) workspace() (string, error) {
	ws := r.Workspace
	if ws == "" {
		ws = r.Bash.Workspace
	}
	if ws == "" {
		return "", errors.New("rewards: no workspace configured")
	}
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", fmt.Errorf("resolve workspace %s: %w", ws, err)
	}
	return filepath.Abs(real)
}

// fileState tells whether a file was written between two looks at it.
type fileState struct {
	mod  int64 // Unix nanoseconds
	size int64
	ino  uint64
}

func stateOf(fi fs.FileInfo) fileState {
	st := fileState{mod: fi.ModTime().UnixNano(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	return st
}
