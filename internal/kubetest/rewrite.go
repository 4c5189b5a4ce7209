package kubetest

import (
	"path/filepath"
	"sort"
	"strings"
)

// rewriter maps paths inside a container to host paths. Processes share
// the host's filesystem, so a volumeMount.mountPath (or a path of the
// image's Files) exists only where a string names it: rewrite replaces
// each such path, as a whole path or as the prefix of a longer one,
// wherever it appears in a command line, env value or workingDir. A path
// counts only at a path boundary: "/agent" is rewritten in "/agent",
// "/agent/x", "cp /x /agent" and "dir:///agent", not in "/data/agent" or
// "/agents".
type rewriter struct {
	pairs []pathPair // longest container path first
}

type pathPair struct{ from, to string }

// newRewriter orders mounts before image files of the same length:
// a volume mounted over an image path hides it, as in a container.
func newRewriter(mounts, files []pathPair) *rewriter {
	pairs := make([]pathPair, 0, len(mounts)+len(files))
	for _, p := range append(append([]pathPair(nil), mounts...), files...) {
		from := filepath.Clean(p.from)
		if !filepath.IsAbs(from) || from == "/" {
			continue // "/" would rewrite every path; relative ones never match
		}
		pairs = append(pairs, pathPair{from: from, to: p.to})
	}
	sort.SliceStable(pairs, func(i, j int) bool { return len(pairs[i].from) > len(pairs[j].from) })
	return &rewriter{pairs: pairs}
}

// rewrite replaces container paths in s in one pass, so a host path put
// in is never rewritten again.
func (r *rewriter) rewrite(s string) string {
	if len(r.pairs) == 0 || !strings.Contains(s, "/") {
		return s
	}
	var b strings.Builder
	i := 0
	for i < len(s) {
		if s[i] == '/' && startsPath(s, i) {
			if p, ok := r.match(s[i:]); ok {
				b.WriteString(p.to)
				i += len(p.from)
				continue
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

func (r *rewriter) match(s string) (pathPair, bool) {
	for _, p := range r.pairs {
		if strings.HasPrefix(s, p.from) && (len(s) == len(p.from) || !isPathChar(s[len(p.from)]) || s[len(p.from)] == '/') {
			return p, true
		}
	}
	return pathPair{}, false
}

// startsPath says whether the '/' at s[i] may begin an absolute path:
// at the start, after a character that cannot be part of a path, or
// after a URL scheme's "//" (dir:///workspace).
func startsPath(s string, i int) bool {
	if i == 0 {
		return true
	}
	if strings.HasSuffix(s[:i], "://") {
		return true
	}
	return !isPathChar(s[i-1])
}

func isPathChar(c byte) bool {
	return c == '/' || c == '.' || c == '_' || c == '-' || c == '~' || c == '+' ||
		('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}
