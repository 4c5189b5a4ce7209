package websession

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Why a CSRF token was refused. A page answers each in its own words:
// ErrCSRFOtherBinding means the form is genuine but belongs to another
// request (another consent page), the others that it did not come from
// this site for this browser, or is too old.
var (
	ErrCSRFMissing      = errors.New("the form has no CSRF token")
	ErrCSRFInvalid      = errors.New("the form's CSRF token was not made by this site for this browser")
	ErrCSRFExpired      = errors.New("the form's CSRF token expired")
	ErrCSRFOtherBinding = errors.New("the form's CSRF token was made for another request")
)

// maxTokenLen bounds what CheckCSRF parses; real tokens are about 100
// characters.
const maxTokenLen = 256

// NewCSRF returns a CSRF token keyed by key (a secret only the browser
// and the server know: a session or double-submit cookie), for purpose
// (which form), bound to binding (what identifies the one request the
// form answers, e.g. the fields of an authorization request), good until
// expires.
//
// The token is "<expiry>.<mac>.<bound mac>": mac covers key, purpose and
// expiry; bound mac covers those and binding too. Two MACs let a check
// tell a forged or foreign token from a genuine one presented for another
// request, so the page can say which; neither can be computed without
// key, and mac alone never passes a check.
func NewCSRF(key, purpose string, expires time.Time, binding ...string) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return exp + "." + csrfMAC(key, "berth csrf", purpose, exp) + "." + csrfMAC(key, append([]string{"berth csrf bound", purpose, exp}, binding...)...)
}

// CheckCSRF checks a token made by NewCSRF with the same key, purpose and
// binding, at time now. It returns nil or one of the ErrCSRF errors.
func CheckCSRF(key, token, purpose string, now time.Time, binding ...string) error {
	if token == "" {
		return ErrCSRFMissing
	}
	if key == "" || len(token) > maxTokenLen {
		return ErrCSRFInvalid
	}
	exp, rest, ok := strings.Cut(token, ".")
	mac, bound, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return ErrCSRFInvalid
	}
	if !macEqual(mac, csrfMAC(key, "berth csrf", purpose, exp)) {
		return ErrCSRFInvalid
	}
	// The expiry is covered by mac, so it is the one NewCSRF wrote.
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return ErrCSRFInvalid
	}
	if !now.Before(time.Unix(unix, 0)) {
		return ErrCSRFExpired
	}
	if !macEqual(bound, csrfMAC(key, append([]string{"berth csrf bound", purpose, exp}, binding...)...)) {
		return ErrCSRFOtherBinding
	}
	return nil
}

// csrfMAC is the MAC, keyed by key, of fields. Each field is
// length-prefixed, so no two different lists of fields encode alike
// ("a","bc" differs from "ab","c"); the first names what the MAC is for,
// so a MAC made for one use never passes for another.
func csrfMAC(key string, fields ...string) string {
	m := hmac.New(sha256.New, []byte(key))
	for _, f := range fields {
		m.Write(binary.AppendUvarint(nil, uint64(len(f))))
		m.Write([]byte(f))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// MAC returns a MAC, keyed by key, of purpose and fields, for markers a
// server hands a browser and checks later without storing them.
func MAC(key, purpose string, fields ...string) string {
	return csrfMAC(key, append([]string{"berth mac", purpose}, fields...)...)
}

// MACEqual reports whether got is want, in constant time; an empty got
// never matches.
func MACEqual(got, want string) bool { return macEqual(got, want) }

func macEqual(got, want string) bool {
	return got != "" && hmac.Equal([]byte(got), []byte(want))
}
