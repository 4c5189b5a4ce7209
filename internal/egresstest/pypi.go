package egresstest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// The one distribution pypi.test has.
const (
	PyPIProject = "berth-demo"
	PyPIWheel   = "berth_demo-1.0-py3-none-any.whl"
	// PyPIModule and PyPIGreeting: `import berth_demo;
	// print(berth_demo.GREETING)` prints "hi".
	PyPIModule   = "berth_demo"
	PyPIGreeting = "hi"
)

// fixedTime is the time stamp of every file in the packages made here, so
// the same code makes the same bytes.
var fixedTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// pypiIndex is a PEP 503 simple index with one wheel.
type pypiIndex struct {
	wheel  []byte
	sha256 string // hex
}

func newPyPI() (*pypiIndex, error) {
	wheel, err := buildWheel()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(wheel)
	return &pypiIndex{wheel: wheel, sha256: hex.EncodeToString(sum[:])}, nil
}

// buildWheel makes berth_demo-1.0-py3-none-any.whl: the module, its
// metadata, and a RECORD with every other file's hash, as pip checks.
func buildWheel() ([]byte, error) {
	const info = "berth_demo-1.0.dist-info/"
	files := []struct{ name, content string }{
		{PyPIModule + "/__init__.py", fmt.Sprintf("GREETING = %q\n", PyPIGreeting)},
		{info + "METADATA", "Metadata-Version: 2.1\nName: berth-demo\nVersion: 1.0\nSummary: A package served by berth's test internet\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: berth-egresstest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f.content))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.content))
	}
	record.WriteString(info + "RECORD,,\n")
	files = append(files, struct{ name, content string }{info + "RECORD", record.String()})

	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: fixedTime}
		h.SetMode(0o644)
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, fmt.Errorf("wheel: %w", err)
		}
		if _, err := w.Write([]byte(f.content)); err != nil {
			return nil, fmt.Errorf("wheel: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("wheel: %w", err)
	}
	return buf.Bytes(), nil
}

// pep503Separators are what PEP 503 folds into one "-" in a project name.
var pep503Separators = regexp.MustCompile(`[-_.]+`)

func (p *pypiIndex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case path == "/simple" || path == "/simple/":
		if path == "/simple" {
			http.Redirect(w, r, "/simple/", http.StatusMovedPermanently)
			return
		}
		page(w, "Simple index", fmt.Sprintf(`<a href="/simple/%s/">%s</a>`, PyPIProject, PyPIProject))
	case strings.HasPrefix(path, "/simple/"):
		name := strings.TrimSuffix(strings.TrimPrefix(path, "/simple/"), "/")
		norm := strings.ToLower(pep503Separators.ReplaceAllString(name, "-"))
		if norm != PyPIProject {
			http.NotFound(w, r)
			return
		}
		if path != "/simple/"+PyPIProject+"/" {
			http.Redirect(w, r, "/simple/"+PyPIProject+"/", http.StatusMovedPermanently)
			return
		}
		page(w, "Links for "+PyPIProject, fmt.Sprintf(`<a href="/packages/%s#sha256=%s">%s</a><br>`, PyPIWheel, p.sha256, PyPIWheel))
	case path == "/packages/"+PyPIWheel:
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, PyPIWheel, fixedTime, bytes.NewReader(p.wheel))
	default:
		http.NotFound(w, r)
	}
}

// page writes a PEP 503 HTML page (its text is the server's own, not
// from the request).
func page(w http.ResponseWriter, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.0\"><title>%s</title></head>\n<body><h1>%s</h1>\n%s\n</body></html>\n", title, title, body)
}
