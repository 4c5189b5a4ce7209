package mcpgw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// maxConfigBytes bounds an upstream config file; real ones are a few lines.
const maxConfigBytes = 64 << 10

var stemPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// upstreamConfig is the content of one <stem>.json file in the upstreams
// directory.
type upstreamConfig struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

func (c upstreamConfig) equal(o upstreamConfig) bool {
	return c.URL == o.URL && maps.Equal(c.Headers, o.Headers)
}

// configProblem is a file in the upstreams directory that was skipped.
type configProblem struct {
	file string
	err  error
}

// loadConfigs reads every *.json file of dir. Files that cannot be used are
// returned as problems, never as an error: one bad file must not hide the
// good ones. A missing directory means no upstreams.
func loadConfigs(dir string) (map[string]upstreamConfig, []configProblem, error) {
	cfgs := map[string]upstreamConfig{}
	if dir == "" {
		return cfgs, nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return cfgs, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read upstreams directory %s: %w", dir, err)
	}
	var problems []configProblem
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") || e.IsDir() {
			continue
		}
		file := filepath.Join(dir, name)
		stem := strings.TrimSuffix(name, ".json")
		if !stemPattern.MatchString(stem) {
			problems = append(problems, configProblem{file, fmt.Errorf("upstream name %q must match [a-zA-Z0-9_-]+", stem)})
			continue
		}
		cfg, err := readConfig(file)
		if err != nil {
			problems = append(problems, configProblem{file, err})
			continue
		}
		cfgs[stem] = cfg
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].file < problems[j].file })
	return cfgs, problems, nil
}

func readConfig(file string) (upstreamConfig, error) {
	f, err := os.Open(file)
	if err != nil {
		return upstreamConfig{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return upstreamConfig{}, fmt.Errorf("read: %w", err)
	}
	if len(data) > maxConfigBytes {
		return upstreamConfig{}, fmt.Errorf("larger than %d bytes", maxConfigBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	// A misspelled "headers" would silently drop credentials, so unknown
	// fields are an error.
	dec.DisallowUnknownFields()
	var cfg upstreamConfig
	if err := dec.Decode(&cfg); err != nil {
		return upstreamConfig{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return upstreamConfig{}, errors.New("invalid JSON: trailing data after the object")
	}
	if err := cfg.validate(); err != nil {
		return upstreamConfig{}, err
	}
	return cfg, nil
}

func (c upstreamConfig) validate() error {
	if c.URL == "" {
		return errors.New(`"url" is required`)
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf(`"url" is not a URL: %w`, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf(`"url" must be http or https, got scheme %q`, u.Scheme)
	}
	if u.Host == "" {
		return errors.New(`"url" has no host`)
	}
	for k, v := range c.Headers {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("header name %q is not a valid HTTP header name", k)
		}
		// The value is never echoed: it is usually a credential.
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("header %q has a value with a line break or NUL", k)
		}
	}
	return nil
}

// displayURL is the form of an upstream URL that may be logged and
// reported: credentials in the user info and the query are hidden.
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		u.RawQuery = "REDACTED"
	}
	return u.String()
}
