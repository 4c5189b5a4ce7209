package forward

import (
	"net/url"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
)

// maxUnescapeRounds bounds how many layers of percent-encoding are peeled
// off when looking for dot segments, so "%252e%252e" is caught as well as
// "%2e%2e" in case anything downstream decodes twice.
const maxUnescapeRounds = 4

// agentURLPath checks and cleans an agent-internal path given without a
// leading slash, in its escaped (on the wire) form. It returns the decoded
// and the escaped absolute path. Empty and repeated slashes and literal "."
// segments are dropped; a trailing slash is kept because it can matter to
// the agent's router. Anything that could climb out of the path the caller
// named (".." or an encoded "." or "..", encoded slashes or backslashes
// hiding one, control characters) is refused with bad_request.
func agentURLPath(p string) (decoded, escaped string, err error) {
	if strings.HasPrefix(p, "/") {
		return "", "", wire.Errorf(wire.CodeBadRequest, "path %q must not start with /", p)
	}
	if strings.ContainsAny(p, "?#") {
		return "", "", wire.Errorf(wire.CodeBadRequest, "path %q must not contain ? or # unescaped", p)
	}
	segs := strings.Split(p, "/")
	kept := segs[:0]
	for _, seg := range segs {
		if seg == "" || seg == "." {
			continue
		}
		if err := checkSegment(p, seg); err != nil {
			return "", "", err
		}
		kept = append(kept, seg)
	}
	escaped = "/" + strings.Join(kept, "/")
	if len(kept) > 0 && strings.HasSuffix(p, "/") {
		escaped += "/"
	}
	decoded, err = url.PathUnescape(escaped)
	if err != nil {
		return "", "", wire.Errorf(wire.CodeBadRequest, "path %q is not valid percent-encoding", p)
	}
	return decoded, escaped, nil
}

func checkSegment(p, seg string) error {
	s := seg
	for range maxUnescapeRounds {
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == 0x7f {
				return wire.Errorf(wire.CodeBadRequest, "path %q contains a control character", p)
			}
		}
		for part := range strings.FieldsFuncSeq(s, func(r rune) bool { return r == '/' || r == '\\' }) {
			if part == "." || part == ".." {
				return wire.Errorf(wire.CodeBadRequest, "path %q contains a dot segment", p)
			}
		}
		if s != seg && (strings.ContainsAny(s, `/\`)) {
			return wire.Errorf(wire.CodeBadRequest, "path %q contains an encoded slash or backslash", p)
		}
		if !strings.Contains(s, "%") {
			return nil
		}
		u, err := url.PathUnescape(s)
		if err != nil {
			return wire.Errorf(wire.CodeBadRequest, "path %q is not valid percent-encoding", p)
		}
		s = u
	}
	return wire.Errorf(wire.CodeBadRequest, "path %q is encoded too many times", p)
}
