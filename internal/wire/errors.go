package wire

import (
	"errors"
	"fmt"
	"net/http"
)

// Error codes. Each maps to one HTTP status through StatusOf.
const (
	CodeBadRequest       = "bad_request"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeConflict         = "conflict"
	CodeTooLarge         = "too_large"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeTooManyRequests  = "too_many_requests"
	// CodeMisdirected: the call reached a replica that cannot serve it
	// (the server's sandbox belongs to another replica, out of this
	// one's reach); the message names the one that can.
	CodeMisdirected    = "misdirected"
	CodeNotImplemented = "not_implemented"
	CodeBadGateway     = "bad_gateway"
	CodeGatewayTimeout = "gateway_timeout" // an agent gave no answer, or a stream moved nothing, within the call's deadline
	CodeUnavailable    = "unavailable"
	CodeInternal       = "internal"
)

// Error makes ErrorDetail usable as a Go error, so code deep in a call
// chain can say which kind of failure it is and the HTTP layer can answer
// with the right status without guessing from strings.
func (e *ErrorDetail) Error() string { return e.Message }

// Errorf returns an *ErrorDetail with the given code and a formatted
// message. Wrapped errors (%w) stay reachable through errors.Unwrap.
func Errorf(code, format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &codedError{detail: ErrorDetail{Code: code, Message: err.Error()}, cause: errors.Unwrap(err)}
}

type codedError struct {
	detail ErrorDetail
	cause  error
}

func (e *codedError) Error() string { return e.detail.Message }
func (e *codedError) Unwrap() error { return e.cause }
func (e *codedError) As(target any) bool {
	if t, ok := target.(**ErrorDetail); ok {
		d := e.detail
		*t = &d
		return true
	}
	return false
}

// DetailOf returns the code and message of err: the innermost coded error
// in its chain wins over outer plain wrapping, but the message is the full
// text of err so that added context is kept. Errors without a code are
// internal.
func DetailOf(err error) ErrorDetail {
	var d *ErrorDetail
	if errors.As(err, &d) {
		return ErrorDetail{Code: d.Code, Message: err.Error()}
	}
	return ErrorDetail{Code: CodeInternal, Message: err.Error()}
}

// StatusOf maps an error code to its HTTP status.
func StatusOf(code string) int {
	switch code {
	case CodeBadRequest:
		return http.StatusBadRequest
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeConflict:
		return http.StatusConflict
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case CodeUnsupportedMedia:
		return http.StatusUnsupportedMediaType
	case CodeTooManyRequests:
		return http.StatusTooManyRequests
	case CodeMisdirected:
		return http.StatusMisdirectedRequest
	case CodeNotImplemented:
		return http.StatusNotImplemented
	case CodeBadGateway:
		return http.StatusBadGateway
	case CodeGatewayTimeout:
		return http.StatusGatewayTimeout
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}
