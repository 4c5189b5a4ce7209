package wire

import (
	"math"
	"regexp"
	"strings"
	"time"
)

// Request checks shared by the agent, which applies the requests, and the
// server, which refuses a bad one at the call (400 naming the field)
// instead of scheduling work the agent would refuse.

// maxSeconds caps timeouts so that huge values cannot overflow a Duration;
// 100 years is as good as forever for a command.
const maxSeconds = 100 * 365 * 24 * 3600

// maxPathBytes is Linux's PATH_MAX: no longer cwd can exist.
const maxPathBytes = 4096

// Seconds resolves an optional seconds field into a Duration: def when v
// is nil, capped at 100 years. zeroOK tells whether 0 is allowed (a grace
// period may be 0, a timeout not).
func Seconds(field string, v *float64, def float64, zeroOK bool) (time.Duration, error) {
	s := def
	if v != nil {
		s = *v
	}
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return 0, Errorf(CodeBadRequest, "%s must be a finite number of seconds", field)
	case s < 0 || (s == 0 && !zeroOK):
		if zeroOK {
			return 0, Errorf(CodeBadRequest, "%s must be >= 0 seconds, got %g", field, s)
		}
		return 0, Errorf(CodeBadRequest, "%s must be > 0 seconds, got %g", field, s)
	}
	return time.Duration(min(s, maxSeconds) * float64(time.Second)), nil
}

// CheckOutputLimit checks a max_output_bytes field: absent, null or a
// number >= 0.
func CheckOutputLimit(o OptionalInt64) error {
	if o.Set && !o.Null && o.Value < 0 {
		return Errorf(CodeBadRequest, "max_output_bytes must be >= 0 or null, got %d", o.Value)
	}
	return nil
}

// CheckEnv checks environment variables: names of letters, digits and
// underscores not starting with a digit, values without NUL bytes (which
// no process environment can hold).
func CheckEnv(env map[string]string) error {
	for k, v := range env {
		if !validEnvName(k) {
			return Errorf(CodeBadRequest, "env: %q is not a valid variable name", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return Errorf(CodeBadRequest, "env: value of %s contains a NUL byte", k)
		}
	}
	return nil
}

func validEnvName(s string) bool {
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

// CheckCwd checks what can be known of a cwd without the sandbox's
// filesystem: whether it exists is the agent's to say.
func CheckCwd(cwd string) error {
	switch {
	case strings.IndexByte(cwd, 0) >= 0:
		return Errorf(CodeBadRequest, "cwd contains a NUL byte")
	case len(cwd) > maxPathBytes:
		return Errorf(CodeBadRequest, "cwd is %d bytes long, more than any path can be (%d)", len(cwd), maxPathBytes)
	}
	return nil
}

// Check checks everything of a one-shot bash request that does not need
// the sandbox: the command, both timeouts, max_output_bytes, cwd and env.
func (r BashRequest) Check() error {
	if strings.TrimSpace(r.Command) == "" {
		return Errorf(CodeBadRequest, "command is required and must not be empty")
	}
	if _, err := Seconds("command_timeout", r.CommandTimeout, DefaultCommandTimeoutSeconds, false); err != nil {
		return err
	}
	if _, err := Seconds("graceful_termination_timeout", r.GracefulTerminationTimeout, DefaultGracefulTerminationSeconds, true); err != nil {
		return err
	}
	if err := CheckOutputLimit(r.MaxOutputBytes); err != nil {
		return err
	}
	if err := CheckCwd(r.Cwd); err != nil {
		return err
	}
	if err := r.Operation.Check(); err != nil {
		return err
	}
	return CheckEnv(r.Env)
}

// Check checks an operation reference: no id, or one of letters, digits
// and hyphens (berth's are UUIDs) that fits a path segment; an age only
// with an id, and not negative.
func (o Operation) Check() error {
	switch {
	case len(o.OperationID) > MaxOperationIDBytes:
		return Errorf(CodeBadRequest, "operation_id: want at most %d bytes, got %d", MaxOperationIDBytes, len(o.OperationID))
	case strings.IndexFunc(o.OperationID, notIDRune) >= 0:
		return Errorf(CodeBadRequest, "operation_id: want letters, digits and hyphens, got %q", o.OperationID)
	case o.OperationAgeMS < 0:
		return Errorf(CodeBadRequest, "operation_age_ms: want >= 0, got %d", o.OperationAgeMS)
	case o.OperationAgeMS > 0 && o.OperationID == "":
		return Errorf(CodeBadRequest, "operation_age_ms: given without operation_id")
	}
	return nil
}

func notIDRune(r rune) bool {
	return !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
}

// Check checks a session exec request: a command without NUL bytes, a
// timeout that is 0 (the default) or a positive finite number of seconds,
// and max_output_bytes.
func (r SessionExecRequest) Check() error {
	switch {
	case strings.TrimSpace(r.Command) == "":
		return Errorf(CodeBadRequest, "command is required and must not be empty")
	case strings.IndexByte(r.Command, 0) >= 0:
		return Errorf(CodeBadRequest, "command contains a NUL byte")
	case r.Timeout < 0 || math.IsNaN(r.Timeout) || math.IsInf(r.Timeout, 0):
		return Errorf(CodeBadRequest, "timeout must be 0 (the default) or a positive finite number of seconds, got %v", r.Timeout)
	case r.Timeout > MaxSessionTimeoutSeconds:
		return Errorf(CodeBadRequest, "timeout: want at most %d seconds, got %v; run longer commands with run_bash_command", MaxSessionTimeoutSeconds, r.Timeout)
	}
	return CheckOutputLimit(r.MaxOutputBytes)
}

var sessionID = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// CheckSessionID refuses what cannot name a persistent shell session:
// anything but an RFC 1123 label (lower-case letters, digits and inner
// hyphens, at most 63 characters). berth checks it before a session id
// becomes part of an agent path, so none can reach another endpoint.
func CheckSessionID(id string) error {
	if !sessionID.MatchString(id) {
		return Errorf(CodeBadRequest, "invalid session id %q: want 1-63 lower-case letters, digits or inner hyphens", id)
	}
	return nil
}
