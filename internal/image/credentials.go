package image

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// maxAuthFileBytes bounds a docker config file; real ones are a few KiB.
const maxAuthFileBytes = 1 << 20

// Credentials are what berth presents to registries, by registry host:
// the operator's (LoadDockerConfig) or a namespace's (ParseDockerConfig),
// combined with Merge. The zero value pulls anonymously. They are only
// ever sent to the registry they name, over HTTPS unless the operator
// listed that registry in Options.PlainHTTP; no method prints a secret,
// so logging a Credentials or an error that holds one shows hosts only.
type Credentials struct {
	hosts map[string]authn.AuthConfig
}

// LoadDockerConfig reads the operator's docker config file (the
// `auths` of ~/.docker/config.json, as `docker login` writes it).
func LoadDockerConfig(path string) (Credentials, error) {
	f, err := os.Open(path)
	if err != nil {
		return Credentials{}, fmt.Errorf("registry credentials: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxAuthFileBytes+1))
	if err != nil {
		return Credentials{}, fmt.Errorf("registry credentials %s: %w", path, err)
	}
	if len(data) > maxAuthFileBytes {
		return Credentials{}, fmt.Errorf("registry credentials %s: over %d bytes", path, maxAuthFileBytes)
	}
	c, err := ParseDockerConfig(data)
	if err != nil {
		return Credentials{}, fmt.Errorf("registry credentials %s: %w", path, err)
	}
	return c, nil
}

// dockerConfig is the part of a docker config file berth reads.
type dockerConfig struct {
	Auths       map[string]dockerAuth `json:"auths"`
	CredsStore  string                `json:"credsStore"`
	CredHelpers map[string]string     `json:"credHelpers"`
}

type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// ParseDockerConfig reads credentials in the docker config format. Error
// messages name registries, never a secret.
func ParseDockerConfig(data []byte) (Credentials, error) {
	var cfg dockerConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		// json's syntax errors quote no input; type errors name fields.
		return Credentials{}, fmt.Errorf("not a docker config file: %w", err)
	}
	if cfg.CredsStore != "" || len(cfg.CredHelpers) > 0 {
		// A helper is a program to run; berth runs none of the operator's
		// programs on its own say-so.
		return Credentials{}, errors.New("it names credential helpers (credsStore or credHelpers), which berth does not run: put each registry's credentials under auths")
	}
	c := Credentials{hosts: map[string]authn.AuthConfig{}}
	for key, a := range cfg.Auths {
		host := registryHost(key)
		if host == "" {
			return Credentials{}, fmt.Errorf("auths key %q names no registry", key)
		}
		ac := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return Credentials{}, fmt.Errorf("auths %q: auth is not base64", key)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok {
				return Credentials{}, fmt.Errorf("auths %q: auth is not user:password", key)
			}
			ac.Username, ac.Password = user, pass
		}
		if ac == (authn.AuthConfig{}) {
			continue // `docker login` with a helper leaves empty entries
		}
		c.hosts[host] = ac
	}
	return c, nil
}

// registryHost turns an auths key ("https://index.docker.io/v1/",
// "registry.example.com:5000") into the host go-containerregistry asks
// for, with every spelling of Docker Hub as index.docker.io.
func registryHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	key, _, _ = strings.Cut(key, "/")
	key = strings.ToLower(key)
	switch key {
	case "docker.io", "registry-1.docker.io", "index.docker.io":
		return "index.docker.io"
	}
	return key
}

// Merge returns c with over's registries replacing c's: a namespace's
// credentials over the operator's.
func (c Credentials) Merge(over Credentials) Credentials {
	m := make(map[string]authn.AuthConfig, len(c.hosts)+len(over.hosts))
	for h, a := range c.hosts {
		m[h] = a
	}
	for h, a := range over.hosts {
		m[h] = a
	}
	return Credentials{hosts: m}
}

func (c Credentials) has(registry string) bool {
	_, ok := c.hosts[registryHost(registry)]
	return ok
}

// Registries lists the registries c has credentials for.
func (c Credentials) Registries() []string {
	hosts := make([]string, 0, len(c.hosts))
	for h := range c.hosts {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	return hosts
}

// String names the registries only.
func (c Credentials) String() string {
	if len(c.hosts) == 0 {
		return "anonymous"
	}
	return "credentials for " + strings.Join(c.Registries(), ", ")
}

// GoString keeps %#v from printing secrets.
func (c Credentials) GoString() string { return "image.Credentials{" + c.String() + "}" }

// LogValue keeps slog from printing secrets.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// Resolve implements authn.Keychain: the credentials of the resource's
// registry, else anonymous.
func (c Credentials) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if a, ok := c.hosts[registryHost(r.RegistryStr())]; ok {
		return authn.FromConfig(a), nil
	}
	return authn.Anonymous, nil
}
