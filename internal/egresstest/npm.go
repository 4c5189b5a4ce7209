package egresstest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
)

// The one package npm.test has.
const (
	NPMPackage = "berth-demo"
	NPMVersion = "1.0.0"
	// NPMGreeting: `require("berth-demo").greeting` is "hi".
	NPMGreeting = "hi"
	npmTarball  = NPMPackage + "-" + NPMVersion + ".tgz"
)

// npmRegistry serves one package's packument and tarball.
type npmRegistry struct {
	tgz       []byte
	integrity string // sha512-<base64>
	shasum    string // sha1 hex
}

func newNPM() (*npmRegistry, error) {
	tgz, err := buildTarball()
	if err != nil {
		return nil, err
	}
	s512 := sha512.Sum512(tgz)
	s1 := sha1.Sum(tgz)
	return &npmRegistry{
		tgz:       tgz,
		integrity: "sha512-" + base64.StdEncoding.EncodeToString(s512[:]),
		shasum:    hex.EncodeToString(s1[:]),
	}, nil
}

// packageJSON is the package's manifest.
func packageJSON() map[string]any {
	return map[string]any{
		"name":        NPMPackage,
		"version":     NPMVersion,
		"description": "A package served by berth's test internet",
		"main":        "index.js",
		"license":     "MIT",
	}
}

// buildTarball makes the package's .tgz, its files under package/ as npm
// packs them.
func buildTarball() ([]byte, error) {
	manifest, err := json.MarshalIndent(packageJSON(), "", "  ")
	if err != nil {
		return nil, err
	}
	files := []struct {
		name    string
		content []byte
	}{
		{"package/package.json", append(manifest, '\n')},
		{"package/index.js", []byte(fmt.Sprintf("module.exports = { greeting: %q };\n", NPMGreeting))},
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.content)), ModTime: fixedTime, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("npm tarball: %w", err)
		}
		if _, err := tw.Write(f.content); err != nil {
			return nil, fmt.Errorf("npm tarball: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("npm tarball: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("npm tarball: %w", err)
	}
	return buf.Bytes(), nil
}

// version returns the document of the one version, its tarball on the
// scheme the client came by.
func (n *npmRegistry) version(r *http.Request) map[string]any {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	v := packageJSON()
	v["_id"] = NPMPackage + "@" + NPMVersion
	v["dist"] = map[string]any{
		"tarball":   fmt.Sprintf("%s://npm.test/%s/-/%s", scheme, NPMPackage, npmTarball),
		"integrity": n.integrity,
		"shasum":    n.shasum,
	}
	return v
}

func (n *npmRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	when := fixedTime.Format("2006-01-02T15:04:05.000Z")
	switch r.URL.Path {
	case "/" + NPMPackage:
		writeJSON(w, http.StatusOK, map[string]any{
			"_id":       NPMPackage,
			"name":      NPMPackage,
			"dist-tags": map[string]string{"latest": NPMVersion},
			"versions":  map[string]any{NPMVersion: n.version(r)},
			"time":      map[string]string{"created": when, "modified": when, NPMVersion: when},
			"modified":  when,
		})
	case "/" + NPMPackage + "/" + NPMVersion, "/" + NPMPackage + "/latest":
		writeJSON(w, http.StatusOK, n.version(r))
	case "/" + NPMPackage + "/-/" + npmTarball:
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, npmTarball, fixedTime, bytes.NewReader(n.tgz))
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
