package store

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/berth-mcp/berth/internal/wire"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinel errors. Every error the store returns for one of these cases
// satisfies errors.Is against the sentinel and carries its wire code, so
// the HTTP layer answers with the right status through wire.DetailOf.
var (
	// ErrNotFound: the row does not exist (wire.CodeNotFound).
	ErrNotFound error = &kindError{code: wire.CodeNotFound, msg: "not found"}
	// ErrConflict: a unique constraint was violated (wire.CodeConflict).
	ErrConflict error = &kindError{code: wire.CodeConflict, msg: "already exists"}
	// ErrInvalid: a value broke a check constraint (wire.CodeBadRequest).
	ErrInvalid error = &kindError{code: wire.CodeBadRequest, msg: "invalid value"}

	// ErrTokenRevoked, ErrTokenExpired and ErrUserDisabled are the
	// answers of TokenByHash for a token that exists but may not be used.
	// They also match ErrNotFound so callers that do not care which treat
	// them like an unknown token.
	ErrTokenRevoked error = &kindError{code: wire.CodeNotFound, msg: "token revoked", parent: ErrNotFound}
	ErrTokenExpired error = &kindError{code: wire.CodeNotFound, msg: "token expired", parent: ErrNotFound}
	ErrUserDisabled error = &kindError{code: wire.CodeNotFound, msg: "user disabled", parent: ErrNotFound}
)

// kindError is a coded error that belongs to a sentinel kind (and through
// it to the kind's parent), optionally wrapping the driver error that
// caused it.
type kindError struct {
	code   string
	msg    string
	parent error // for sentinels: the broader sentinel they also match
	kind   error // for instances: the sentinel they match
	cause  error
}

func (e *kindError) Error() string { return e.msg }

func (e *kindError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.parent, e.kind, e.cause} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// As lets wire.DetailOf find the code without the store depending on
// wire's unexported error type.
func (e *kindError) As(target any) bool {
	if t, ok := target.(**wire.ErrorDetail); ok {
		*t = &wire.ErrorDetail{Code: e.code, Message: e.msg}
		return true
	}
	return false
}

// newError returns an error of the given sentinel kind with a formatted
// message.
func newError(kind error, format string, args ...any) error {
	k := kind.(*kindError)
	return &kindError{code: k.code, msg: fmt.Sprintf(format, args...), kind: kind}
}

// notFound is newError(ErrNotFound, ...).
func notFound(format string, args ...any) error { return newError(ErrNotFound, format, args...) }

// constraintMessages names the field behind each constraint of the schema
// in words a caller can act on.
var constraintMessages = map[string]string{
	"users_username_key":                       "username already exists",
	"users_username_check":                     "username must be 1 to 64 characters of a-z, 0-9, '.', '_', '@' or '-'",
	"session_tokens_token_hash_key":            "token_hash already exists",
	"session_tokens_token_hash_check":          "token_hash must be 32 bytes (SHA-256)",
	"session_tokens_token_prefix_check":        "token_prefix must be at most 12 characters",
	"session_tokens_user_id_fkey":              "user_id does not name an existing user",
	"role_bindings_subject_kind_check":         "subject_kind must be 'user' or 'group'",
	"role_bindings_subject_check":              "subject must not be empty",
	"role_bindings_role_check":                 "role must be one of admin, member, viewer",
	"role_bindings_subject_role_namespace_key": "role binding (subject_kind, subject, role, namespace) already exists",
	"audit_log_action_check":                   "action must not be empty",
	"audit_log_outcome_check":                  "outcome must be one of ok, denied, error",
}

// keyColumns pulls the column list out of a unique violation's detail,
// "Key (a, b)=(...) already exists." The values are left out on purpose:
// they may be token hashes.
var keyColumns = regexp.MustCompile(`^Key \(([^)]*)\)=`)

// mapError turns PostgreSQL constraint violations into coded store errors,
// pgx.ErrNoRows into ErrNotFound and connection failures into
// ErrUnavailable; other errors pass through. The
// driver error stays in the chain for callers that need its fields.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	var done *kindError
	if errors.As(err, &done) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return &kindError{code: wire.CodeNotFound, msg: "not found", kind: ErrNotFound, cause: err}
	}
	if connectionFailure(err) {
		return Classify(err)
	}
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return err
	}
	msg, known := constraintMessages[pg.ConstraintName]
	var kind error
	switch pg.Code {
	case "23505": // unique_violation
		kind = ErrConflict
		if !known {
			field := pg.ConstraintName
			if m := keyColumns.FindStringSubmatch(pg.Detail); m != nil {
				field = m[1]
			}
			msg = fmt.Sprintf("%s.%s already exists", pg.TableName, field)
		}
	case "23503": // foreign_key_violation
		kind = ErrNotFound
		if !known {
			msg = fmt.Sprintf("%s: referenced row does not exist (%s)", pg.TableName, pg.ConstraintName)
		}
	case "23514": // check_violation
		kind = ErrInvalid
		if !known {
			msg = fmt.Sprintf("%s: invalid value (constraint %s)", pg.TableName, pg.ConstraintName)
		}
	case "23502": // not_null_violation
		kind = ErrInvalid
		msg = fmt.Sprintf("%s.%s must not be null", pg.TableName, pg.ColumnName)
	case "22021", "22P05": // character_not_in_repertoire, untranslatable_character
		kind = ErrInvalid
		msg = "text must be valid UTF-8 without NUL bytes"
	case "22001": // string_data_right_truncation
		kind = ErrInvalid
		msg = "value too long: " + pg.Message
	default:
		return err
	}
	// Keep the context callers wrapped around the driver error, but say
	// what went wrong in the schema's terms.
	msg = strings.Replace(err.Error(), pg.Error(), msg, 1)
	k := kind.(*kindError)
	return &kindError{code: k.code, msg: msg, kind: kind, cause: err}
}
