package image

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// The cache's directory:
//
//	layers/<alg>-<hex>/root/        a layer's files, by its blob's digest
//	layers/<alg>-<hex>/layer.json   what unpacking found; written before the rename
//	images/<alg>-<hex>.json         an image, by its manifest's digest
//	pins/<holder>                   the digest a holder (a sandbox) uses
//	tmp/                            layers being unpacked; emptied at Open
//	trash/                          layers being removed; emptied at Open
//
// A layer directory appears by one rename of a complete, synced
// directory, so a crash leaves either nothing or a whole layer there.
const (
	layersDir = "layers"
	imagesDir = "images"
	pinsDir   = "pins"
	tmpDir    = "tmp"
	trashDir  = "trash"
	rootDir   = "root"
	layerFile = "layer.json"
	// format changes when unpacking does, so that layers unpacked by an
	// older berth are unpacked again instead of trusted.
	format = 1
	// maxSources bounds the repositories a record remembers.
	maxSources = 256
)

var (
	digestRe = regexp.MustCompile(`^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$`)
	holderRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// key is a digest as a file name.
func key(digest string) (string, error) {
	if !digestRe.MatchString(digest) {
		return "", fmt.Errorf("%q is not a sha256 or sha512 digest", digest)
	}
	return strings.Replace(digest, ":", "-", 1), nil
}

// layerRecord is layer.json.
type layerRecord struct {
	Format    int    `json:"format"`
	Digest    string `json:"digest"` // the blob it was unpacked from
	MediaType string `json:"media_type"`
	unpacked
	// Sources are the repositories (registry/name) whose registry served
	// this content, verified: a layer serves an image of another
	// repository only after that repository's registry served it too.
	Sources []string  `json:"sources"`
	Created time.Time `json:"created"`
	// Boot is the host's boot when the layer was unpacked, and Synced
	// says a syncfs has passed since: a layer of an earlier boot that
	// was not synced may have lost data in a host crash and is dropped.
	// (Within a boot the page cache holds it whole.)
	Boot   string `json:"boot,omitempty"`
	Synced bool   `json:"synced"`
}

// imageRecord is images/<key>.json.
type imageRecord struct {
	Format  int      `json:"format"`
	Digest  string   `json:"digest"`
	Indexes []string `json:"indexes,omitempty"` // index digests that chose it for this platform
	Refs    []string `json:"refs"`
	Sources []string `json:"sources"`
	// Layers are the layers' blob digests, lowest first, all of them
	// (Image.Layers leaves out those under a root-opaque layer).
	Layers []string `json:"layers"`
	Config Config   `json:"config"`
	// Manifest and ConfigFile are the image's own bytes, kept for images
	// a build made (AddBuild), so that a build on one needs no registry.
	Manifest   []byte    `json:"manifest,omitempty"`
	ConfigFile []byte    `json:"config_file,omitempty"`
	Pulled     time.Time `json:"pulled"`
	LastUsed   time.Time `json:"last_used"`
}

// addTo adds v to list (bounded, most recent kept) and says whether it
// was new.
func addTo(list *[]string, v string) bool {
	if slices.Contains(*list, v) {
		return false
	}
	*list = append(*list, v)
	if len(*list) > maxSources {
		*list = (*list)[len(*list)-maxSources:]
	}
	return true
}

// writeJSON replaces path with v's JSON by a rename, so a reader (or a
// process crash) sees the old file or the new, never a part; durable
// syncs the file first, for a host crash too.
func writeJSON(path string, v any, durable bool) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil && durable {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}
