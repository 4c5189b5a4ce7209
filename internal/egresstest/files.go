package egresstest

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Hello is what every web host answers at /hello.
const Hello = "hello from the test internet\n"

// MaxBytes bounds /bytes/N.
const MaxBytes = 1 << 30

// withHello answers /hello and passes everything else to next.
func withHello(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hello" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte(Hello))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// filesHandler serves /bytes/N: N bytes (up to MaxBytes) of a pattern a
// client can check (byte k is k mod 251, a prime, so that a lost or
// repeated block of any power-of-two size shows), streamed.
func filesHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/bytes/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || n < 0 || n > MaxBytes {
			http.Error(w, "N must be a number of bytes from 0 to 1073741824", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		if r.Method == http.MethodHead {
			return
		}
		// A buffer whose length is a multiple of 251 keeps the pattern
		// going across writes.
		buf := make([]byte, 251*128)
		for k := range buf {
			buf[k] = byte(k % 251)
		}
		for n > 0 {
			chunk := buf
			if int64(len(chunk)) > n {
				chunk = chunk[:n]
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
			n -= int64(len(chunk))
		}
	})
}

// ReadPattern reads r to its end and checks it is the content of
// /bytes/N, returning N, or an error at the first byte that differs.
func ReadPattern(r io.Reader) (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	for {
		m, err := r.Read(buf)
		for k, b := range buf[:m] {
			if want := byte((n + int64(k)) % 251); b != want {
				return n + int64(k), fmt.Errorf("byte %d is %d, not %d", n+int64(k), b, want)
			}
		}
		n += int64(m)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
