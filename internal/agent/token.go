package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode"
)

// MinTokenBytes is the shortest token the agent accepts: a shorter secret
// is guessable, and a too-short token is usually a configuration mistake.
const MinTokenBytes = 32

// ReadTokenFile reads a bearer token file with the coder-k8s rules: one
// token of at least 32 bytes, no whitespace inside, a trailing newline
// ignored.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	return parseToken(b, "token file "+path)
}

func parseToken(b []byte, source string) (string, error) {
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if err := CheckToken(string(b)); err != nil {
		return "", fmt.Errorf("%s: %w", source, err)
	}
	return string(b), nil
}

// ReadTokenFD reads a token from an inherited descriptor (a pipe the
// sandbox's init wrote it to) with the file rules, and closes it so that
// no command the agent starts inherits it.
func ReadTokenFD(fd int) (string, error) {
	if fd < 3 {
		return "", fmt.Errorf("token descriptor %d: want 3 or more", fd)
	}
	f := os.NewFile(uintptr(fd), "token")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("read token descriptor %d: %w", fd, err)
	}
	return parseToken(b, fmt.Sprintf("token descriptor %d", fd))
}

// CheckToken applies the token rules to a token given directly (for
// example through BERTH_AGENT_TOKEN).
func CheckToken(tok string) error {
	if tok == "" {
		return errors.New("token is empty")
	}
	for _, r := range tok {
		if unicode.IsSpace(r) {
			return errors.New("token contains whitespace")
		}
	}
	if len(tok) < MinTokenBytes {
		return fmt.Errorf("token is %d bytes, want at least %d", len(tok), MinTokenBytes)
	}
	return nil
}
