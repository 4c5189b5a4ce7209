package rewards

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// pattern is a workspace-relative glob split into "/" segments; a "**"
// segment matches any number of directories, including none.
type pattern struct {
	text string
	segs []string
}

// compile checks a glob from the request or the configuration: it must
// be valid and must not reach outside the workspace.
func compile(ws, text string) (pattern, error) {
	p := text
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(ws, p)
		if err != nil {
			return pattern{}, wire.Errorf(wire.CodeBadRequest, "junit_paths: %q is outside the workspace", text)
		}
		p = rel
	}
	p = path.Clean(filepath.ToSlash(p))
	if p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return pattern{}, wire.Errorf(wire.CodeBadRequest, "junit_paths: %q is outside the workspace", text)
	}
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s == "**" {
			if len(segs) > 0 && segs[len(segs)-1] == "**" {
				continue
			}
		} else if _, err := path.Match(s, ""); err != nil {
			return pattern{}, wire.Errorf(wire.CodeBadRequest, "junit_paths: %q is not a valid glob: %w", text, err)
		}
		segs = append(segs, s)
	}
	if segs[len(segs)-1] == "**" {
		// A report is a file; "dir/**" means every file below dir.
		segs = append(segs, "*")
	}
	return pattern{text: text, segs: segs}, nil
}

// root is the literal directory prefix of the pattern, where walking can
// start instead of at the top of the workspace.
func (p pattern) root() string {
	n := 0
	for n < len(p.segs)-1 && !hasMeta(p.segs[n]) {
		n++
	}
	return path.Join(p.segs[:n]...)
}

func hasMeta(s string) bool { return s == "**" || strings.ContainsAny(s, `*?[\`) }

// match reports whether the slash-separated relative path matches.
func (p pattern) match(rel string) bool { return matchSegs(p.segs, strings.Split(rel, "/")) }

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// canContain reports whether a directory could hold a match, so that the
// walk skips subtrees the pattern cannot reach.
func (p pattern) canContain(dir string) bool {
	if dir == "." {
		return true
	}
	pat, name := p.segs, strings.Split(dir, "/")
	for len(name) > 0 {
		if len(pat) == 0 {
			return false
		}
		if pat[0] == "**" {
			return true
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(pat) > 0
}

// find returns the workspace-relative paths of the regular files below ws
// that match any of the patterns, with their modification state. ws must
// be free of symbolic links (see realWorkspace). The walk does not follow
// symbolic links, and the literal directory a pattern starts from must
// resolve inside ws, so a match always lies inside the workspace. .git
// directories are skipped: reports are never kept there.
func find(ws string, pats []pattern) (map[string]fileState, error) {
	found := map[string]fileState{}
	for _, p := range pats {
		root := p.root()
		dir, err := filepath.EvalSymlinks(filepath.Join(ws, filepath.FromSlash(root)))
		if err != nil || !within(ws, dir) {
			continue // nothing there, or it leads out of the workspace
		}
		err = filepath.WalkDir(dir, func(full string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
					return nil
				}
				return err
			}
			below, err := filepath.Rel(dir, full)
			if err != nil {
				return err
			}
			// Name the file by the path the pattern sees, which may go
			// through a symbolic link inside the workspace.
			rel := path.Join(root, filepath.ToSlash(below))
			if d.IsDir() {
				if d.Name() == ".git" || !p.canContain(rel) {
					return filepath.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() || !p.match(rel) {
				return nil
			}
			if _, seen := found[rel]; seen {
				return nil
			}
			if fi, err := d.Info(); err == nil { // else removed while walking
				found[rel] = stateOf(fi)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("search reports matching %q: %w", p.text, err)
		}
	}
	return found, nil
}

// within reports whether path p is dir or below it.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
