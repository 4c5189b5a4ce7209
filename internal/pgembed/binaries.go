//go:build unix

package pgembed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-mcp/berth/internal/wire"
)

// binaries are the server programs of one PostgreSQL installation. They
// are taken from one directory because pg_ctl starts the postgres that
// sits next to it.
type binaries struct {
	initdb, pgctl, postgres string
	major                   int // 0 when unknown
}

var programs = []string{"initdb", "pg_ctl", "postgres"}

// findBinaries looks on pathList first, then in root/*/bin, highest major
// version first. When the data directory already exists (wantMajor > 0)
// the installation of that major version wins, since postgres refuses
// data files of another major version.
func findBinaries(ctx context.Context, pathList, root string, wantMajor int) (binaries, error) {
	var cands []binaries
	if b, ok := fromPath(ctx, pathList); ok {
		cands = append(cands, b)
	}
	cands = append(cands, fromRoot(root)...)
	if len(cands) == 0 {
		return binaries{}, wire.Errorf(wire.CodeUnavailable,
			"PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH or in %s/*/bin: "+
				"install them with `apt-get install postgresql` (Debian/Ubuntu) or pass --database-url", root)
	}
	if wantMajor == 0 {
		return cands[0], nil
	}
	var seen []string
	for _, b := range cands {
		if b.major == wantMajor {
			return b, nil
		}
		seen = append(seen, fmt.Sprintf("%s (PostgreSQL %d)", filepath.Dir(b.pgctl), b.major))
	}
	return binaries{}, wire.Errorf(wire.CodeUnavailable,
		"the embedded database was created by PostgreSQL %d but only %s are installed: "+
			"install PostgreSQL %d (e.g. `apt-get install postgresql-%d`) or pass --database-url",
		wantMajor, strings.Join(seen, ", "), wantMajor, wantMajor)
}

// fromPath finds pg_ctl on pathList and takes its siblings, resolving
// symlinks such as /usr/local/bin/pg_ctl -> /usr/lib/postgresql/15/bin/pg_ctl.
func fromPath(ctx context.Context, pathList string) (binaries, bool) {
	for _, d := range filepath.SplitList(pathList) {
		if d == "" || !filepath.IsAbs(d) {
			continue // relative PATH entries depend on the working directory
		}
		p := filepath.Join(d, "pg_ctl")
		if !isExecutable(p) {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			continue
		}
		if b, ok := inDir(filepath.Dir(real)); ok {
			b.major = versionOf(ctx, real)
			return b, true
		}
	}
	return binaries{}, false
}

func fromRoot(root string) []binaries {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	type ver struct {
		major, minor int
		name         string
	}
	var vs []ver
	for _, e := range ents {
		if v, ok := parseVersionDir(e.Name()); ok {
			vs = append(vs, ver{v[0], v[1], e.Name()})
		}
	}
	slices.SortFunc(vs, func(a, b ver) int {
		if a.major != b.major {
			return b.major - a.major
		}
		return b.minor - a.minor
	})
	var out []binaries
	for _, v := range vs {
		if b, ok := inDir(filepath.Join(root, v.name, "bin")); ok {
			b.major = v.major
			out = append(out, b)
		}
	}
	return out
}

// parseVersionDir accepts "15" and the pre-10 style "9.6" as
// {major, minor}.
func parseVersionDir(name string) ([2]int, bool) {
	major, minor, _ := strings.Cut(name, ".")
	a, err := strconv.Atoi(major)
	if err != nil || a <= 0 {
		return [2]int{}, false
	}
	b := 0
	if minor != "" {
		if b, err = strconv.Atoi(minor); err != nil {
			return [2]int{}, false
		}
	}
	return [2]int{a, b}, true
}

func inDir(dir string) (binaries, bool) {
	b := binaries{
		initdb:   filepath.Join(dir, "initdb"),
		pgctl:    filepath.Join(dir, "pg_ctl"),
		postgres: filepath.Join(dir, "postgres"),
	}
	for _, p := range []string{b.initdb, b.pgctl, b.postgres} {
		if !isExecutable(p) {
			return binaries{}, false
		}
	}
	return b, true
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// versionOf asks pg_ctl for its major version; 0 when it cannot tell.
func versionOf(ctx context.Context, pgctl string) int {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, pgctl, "--version").Output()
	if err != nil {
		return 0
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// dataVersion reads the major version of an existing data directory; 0
// when it is not initialized yet.
func dataVersion(dataDir string) int {
	raw, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION"))
	if err != nil {
		return 0
	}
	s := strings.TrimSpace(string(raw))
	if strings.HasPrefix(s, "9.") {
		return 9
	}
	n, _ := strconv.Atoi(s)
	return n
}
