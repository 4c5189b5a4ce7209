package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// DebianPackages are what the Debian-based test images hold: bash and
// what berth's attack suite runs inside a sandbox (coreutils, findutils,
// grep, procps, util-linux's setsid, unshare and mount, python3), with
// everything they depend on.
var DebianPackages = []string{
	"base-files", "bash", "dash", "coreutils", "findutils", "grep", "sed", "procps", "util-linux", "python3",
}

// skippedDebianDirs hold nothing a program needs to run: leaving them
// out halves the image.
var skippedDebianDirs = []string{
	"/usr/share/doc/", "/usr/share/man/", "/usr/share/info/", "/usr/share/locale/", "/usr/share/lintian/", "/usr/share/bug/",
}

// DebianLayer is a layer of this host's installed Debian packages: the
// files of packages and of every package they depend on (Depends and
// Pre-Depends, the first installed alternative), as dpkg lists them, with
// the merged /usr links of a Debian 12 root. The image made from it is a
// Debian image of the host's own packages, built without a network or a
// Docker engine. It fails, naming the package, where one is not
// installed here.
func DebianLayer(ctx context.Context, packages ...string) (*Layer, error) {
	all, err := installedPackages(ctx)
	if err != nil {
		return nil, err
	}
	closure, err := all.closure(packages)
	if err != nil {
		return nil, err
	}
	l := NewLayer()
	// Debian 12 merges /bin, /sbin and /lib into /usr: the root's links,
	// which dpkg lists as folders.
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		l.Symlink("/"+d, "usr/"+d)
	}
	for _, pkg := range closure {
		paths, err := packageFiles(pkg)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if skipped(p) {
				continue
			}
			inImage, ok := canonical(p)
			if !ok {
				continue // a root link, or listed but not here (docs dpkg was told to leave out)
			}
			if err := l.HostFile(inImage, inImage); err != nil {
				return nil, fmt.Errorf("package %s: %w", pkg, err)
			}
		}
	}
	return l, nil
}

func skipped(p string) bool {
	for _, d := range skippedDebianDirs {
		if strings.HasPrefix(p+"/", d) {
			return true
		}
	}
	return false
}

// canonical resolves the folders of a path dpkg lists (/bin/bash) to
// where they are (/usr/bin/bash), keeping its last element as it is, so a
// link stays a link. It says false for a path that is not here, or that
// is itself one of the root's /usr links.
func canonical(p string) (string, bool) {
	dir, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return "", false
	}
	out := filepath.Join(dir, filepath.Base(p))
	st, err := os.Lstat(out)
	if err != nil {
		return "", false
	}
	if st.Mode()&fs.ModeSymlink != 0 && filepath.Dir(out) == "/" {
		return "", false
	}
	return out, true
}

// packageFiles lists the paths dpkg installed for pkg.
func packageFiles(pkg string) ([]string, error) {
	var b []byte
	var err error
	for _, name := range []string{pkg + ":amd64.list", pkg + ".list"} {
		if b, err = os.ReadFile(filepath.Join("/var/lib/dpkg/info", name)); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("files of Debian package %s: %w", pkg, err)
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		if p := strings.TrimSpace(line); p != "" && p != "/." {
			out = append(out, p)
		}
	}
	return out, nil
}

// debPackages are the installed packages: each one's dependencies (a
// list of alternatives each) and the virtual packages it provides.
type debPackages struct {
	depends  map[string][][]string
	provides map[string][]string
}

func installedPackages(ctx context.Context) (debPackages, error) {
	out, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f", "${Package}\t${db:Status-Abbrev}\t${Pre-Depends}, ${Depends}\t${Provides}\n").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return debPackages{}, fmt.Errorf("list Debian packages (dpkg-query): %w", err)
	}
	d := debPackages{depends: map[string][][]string{}, provides: map[string][]string{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 || !strings.HasPrefix(f[1], "ii") {
			continue
		}
		var deps [][]string
		for _, group := range strings.Split(f[2], ",") {
			var alts []string
			for _, alt := range strings.Split(group, "|") {
				if n := packageName(alt); n != "" {
					alts = append(alts, n)
				}
			}
			if len(alts) > 0 {
				deps = append(deps, alts)
			}
		}
		d.depends[f[0]] = deps
		for _, v := range strings.Split(f[3], ",") {
			if n := packageName(v); n != "" {
				d.provides[n] = append(d.provides[n], f[0])
			}
		}
	}
	return d, sc.Err()
}

// packageName is the name in a dependency such as "libc6 (>= 2.34)" or
// "python3:any".
func packageName(dep string) string {
	n, _, _ := strings.Cut(strings.TrimSpace(dep), " ")
	n, _, _ = strings.Cut(n, ":")
	return n
}

// closure returns roots and everything they depend on, sorted.
func (d debPackages) closure(roots []string) ([]string, error) {
	seen := map[string]bool{}
	todo := append([]string(nil), roots...)
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[p] {
			continue
		}
		deps, ok := d.depends[p]
		if !ok {
			return nil, fmt.Errorf("Debian package %s is not installed here (apt-get install %s)", p, p)
		}
		seen[p] = true
		for _, alts := range deps {
			if dep := d.resolve(alts); dep != "" {
				todo = append(todo, dep)
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// resolve picks the first installed alternative, by name or by what a
// package provides; "" when none is installed (dpkg let it be).
func (d debPackages) resolve(alts []string) string {
	for _, a := range alts {
		if _, ok := d.depends[a]; ok {
			return a
		}
		if ps := d.provides[a]; len(ps) > 0 {
			return ps[0]
		}
	}
	return ""
}
