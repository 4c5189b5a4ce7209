package orchestrator

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
	"github.com/berth-mcp/berth/internal/wire"
)

// ImageSpec is one image of a build_images_from_yaml document, checked.
// Its JSON form is what a build job records (env values stay out: they
// are sealed apart).
type ImageSpec struct {
	Name             string          `json:"name"`
	Base             string          `json:"base"`
	Commands         []string        `json:"commands"`
	Files            []runtime.File  `json:"files"`
	EnvKeys          []string        `json:"env_keys"`
	RuntimeClassName string          `json:"runtime_class_name,omitempty"`
	Resources        store.Resources `json:"resources"`
	// TimeoutSeconds bounds the whole build (0: Config.BuildTimeout).
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`

	Env  map[string]string `json:"-"`
	Line int               `json:"-"`
}

// Limits of one document. The YAML travels in one request and every
// image of it becomes a job row, so both are bounded.
const (
	maxBuildYAML      = 1 << 20
	maxBuildImages    = 32
	maxBuildCommands  = 200
	maxBuildFiles     = 1000
	maxBuildTimeout   = 24 * time.Hour
	maxImageNameBytes = 63
)

// imageFields are the fields of an image berth acts on.
var imageFields = []string{"name", "base", "commands", "env", "files", "runtime_class_name", "resources", "timeout_seconds"}

// ideGYMOnlyFields are fields of IdeGYM's image builder that berth has no
// equivalent for. IdeGYM writes them into every definition it dumps, so
// they are accepted when they say nothing (null, "", [] or {}) and
// refused when they would make the image something berth cannot build.
var ideGYMOnlyFields = map[string]string{
	"plugins":         "plugins are Python classes; write what they do as commands and files",
	"base_dockerfile": "berth builds from a base image or template, not Dockerfile text; put the steps in commands",
	"base_stage":      "berth builds from a base image or template, not Dockerfile text",
	"context_uri":     "berth takes no build context archive; put the files under files",
	"secrets":         "put values the commands need in env (stored encrypted)",
	"tag":             "the image is named by name",
	"registry":        "the registry is the operator's --image-registry",
	"version":         "the image is named by name",
	"machine_type":    "builds run with resources",
	"disk_size_gb":    "builds run with the sandbox's disk limit",
	"platforms":       "builds are for the platform berth runs on",
}

var (
	imageNameRE    = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)
	runtimeClassRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// specError is a bad request naming where in the document it is.
func specError(where string, n *yaml.Node, format string, args ...any) error {
	return wire.Errorf(wire.CodeBadRequest, "%s (line %d): %s", where, n.Line, fmt.Sprintf(format, args...))
}

// ParseImageSpecs reads and checks an image-builder document:
//
//	images:
//	  - name: my-env
//	    base: base
//	    files: {setup.cfg: "..."}
//	    env: {PIP_INDEX_URL: "..."}
//	    commands: [pip install -e .]
//
// Errors are bad requests that name the field and its line.
func ParseImageSpecs(doc string) ([]ImageSpec, error) {
	if len(doc) > maxBuildYAML {
		return nil, wire.Errorf(wire.CodeBadRequest, "yaml: %d bytes, at most %d", len(doc), maxBuildYAML)
	}
	dec := yaml.NewDecoder(strings.NewReader(doc))
	var root yaml.Node
	if err := dec.Decode(&root); errors.Is(err, io.EOF) {
		return nil, wire.Errorf(wire.CodeBadRequest, "yaml: empty document; want images: [{name, base, commands, ...}]")
	} else if err != nil {
		return nil, wire.Errorf(wire.CodeBadRequest, "%v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, wire.Errorf(wire.CodeBadRequest, "yaml: more than one document; put every image in one images list")
	}
	top := root.Content[0]
	if err := refuseAliases(top); err != nil {
		return nil, err
	}
	if top.Kind != yaml.MappingNode {
		return nil, specError("document", top, "want a mapping with images: [...]")
	}
	fields, err := mappingFields("document", top)
	if err != nil {
		return nil, err
	}
	for k, kv := range fields {
		if k != "images" {
			return nil, specError(k, kv.key, "unknown field; the document has only images")
		}
	}
	images, ok := fields["images"]
	if !ok {
		return nil, specError("document", top, "images is missing")
	}
	list := images.value
	if list.Kind != yaml.SequenceNode {
		return nil, specError("images", list, "want a list of images")
	}
	if len(list.Content) == 0 {
		return nil, specError("images", list, "empty; want at least one image")
	}
	if len(list.Content) > maxBuildImages {
		return nil, specError("images", list, "%d images, at most %d in one document", len(list.Content), maxBuildImages)
	}
	out := make([]ImageSpec, 0, len(list.Content))
	seen := map[string]int{}
	for i, item := range list.Content {
		where := fmt.Sprintf("images[%d]", i)
		spec, err := parseImage(where, item)
		if err != nil {
			return nil, err
		}
		if line, dup := seen[spec.Name]; dup {
			return nil, specError(where+".name", item, "image %q is already defined at line %d", spec.Name, line)
		}
		seen[spec.Name] = item.Line
		out = append(out, spec)
	}
	return out, nil
}

// refuseAliases refuses anchors and aliases anywhere: they let a small
// document stand for a huge one, and image definitions do not need them.
func refuseAliases(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return wire.Errorf(wire.CodeBadRequest, "yaml (line %d): anchors and aliases are not accepted", n.Line)
	}
	for _, c := range n.Content {
		if err := refuseAliases(c); err != nil {
			return err
		}
	}
	return nil
}

type keyValue struct{ key, value *yaml.Node }

// mappingFields returns a mapping's fields by key, refusing duplicate
// keys and keys that are not plain strings.
func mappingFields(where string, m *yaml.Node) (map[string]keyValue, error) {
	out := make(map[string]keyValue, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			return nil, specError(where, k, "keys must be strings")
		}
		if prev, dup := out[k.Value]; dup {
			return nil, specError(join(where, k.Value), k, "duplicate key (first at line %d)", prev.key.Line)
		}
		out[k.Value] = keyValue{k, v}
	}
	return out, nil
}

func join(where, field string) string {
	if where == "document" {
		return field
	}
	return where + "." + field
}

func parseImage(where string, item *yaml.Node) (ImageSpec, error) {
	spec := ImageSpec{Line: item.Line, Commands: []string{}, Files: []runtime.File{}, EnvKeys: []string{}}
	if item.Kind != yaml.MappingNode {
		return spec, specError(where, item, "want a mapping with name, base, commands, ...")
	}
	fields, err := mappingFields(where, item)
	if err != nil {
		return spec, err
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		kv := fields[k]
		at := where + "." + k
		if why, ok := ideGYMOnlyFields[k]; ok {
			if !saysNothing(kv.value) {
				return spec, specError(at, kv.key, "IdeGYM's image builder has %s, berth does not (%s); berth reads %s", k, why, strings.Join(imageFields, ", "))
			}
			continue
		}
		if !slices.Contains(imageFields, k) {
			return spec, specError(at, kv.key, "unknown field; an image has %s", strings.Join(imageFields, ", "))
		}
		if err := spec.setField(at, k, kv.value); err != nil {
			return spec, err
		}
	}
	if spec.Name == "" {
		return spec, specError(where+".name", item, "is required: the image to make")
	}
	if spec.Base == "" {
		return spec, specError(where+".base", item, "is required: the image (or template) to start from")
	}
	if len(spec.Commands) == 0 && len(spec.Files) == 0 {
		return spec, specError(where, item, "nothing to build: give commands, files or both")
	}
	return spec, nil
}

// saysNothing reports whether a value is null, empty or an empty list or
// mapping.
func saysNothing(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Tag == "!!null" || n.Value == ""
	case yaml.SequenceNode, yaml.MappingNode:
		return len(n.Content) == 0
	}
	return false
}

func (spec *ImageSpec) setField(at, k string, v *yaml.Node) error {
	switch k {
	case "name":
		s, err := text(at, v)
		if err != nil {
			return err
		}
		if len(s) > maxImageNameBytes || !imageNameRE.MatchString(s) || strings.Contains(s, "..") {
			return specError(at, v, "%q: want lowercase letters, digits, '.', '_' and '-', starting and ending with a letter or digit, at most %d characters", s, maxImageNameBytes)
		}
		spec.Name = s
	case "base":
		s, err := text(at, v)
		if err != nil {
			return err
		}
		if len(s) > 255 || strings.ContainsAny(s, " \t\r\n") {
			return specError(at, v, "want an image reference without spaces, at most 255 characters")
		}
		spec.Base = s
	case "commands":
		return spec.setCommands(at, v)
	case "env":
		return spec.setEnv(at, v)
	case "files":
		return spec.setFiles(at, v)
	case "runtime_class_name":
		s, err := text(at, v)
		if err != nil {
			return err
		}
		if len(s) > 253 || !runtimeClassRE.MatchString(s) {
			return specError(at, v, "%q: want a Kubernetes runtime class name (RFC 1123 subdomain) such as gvisor", s)
		}
		spec.RuntimeClassName = s
	case "resources":
		return spec.setResources(at, v)
	case "timeout_seconds":
		s, err := text(at, v)
		if err != nil {
			return err
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || time.Duration(n)*time.Second > maxBuildTimeout {
			return specError(at, v, "%q: want a whole number of seconds from 1 to %d", s, int(maxBuildTimeout.Seconds()))
		}
		spec.TimeoutSeconds = n
	}
	return nil
}

func (spec *ImageSpec) setCommands(at string, v *yaml.Node) error {
	if v.Kind != yaml.SequenceNode {
		return specError(at, v, "want a list of shell commands")
	}
	if len(v.Content) > maxBuildCommands {
		return specError(at, v, "%d commands, at most %d", len(v.Content), maxBuildCommands)
	}
	for i, c := range v.Content {
		cat := fmt.Sprintf("%s[%d]", at, i)
		s, err := text(cat, c)
		if err != nil {
			return err
		}
		if strings.TrimSpace(s) == "" {
			return specError(cat, c, "empty command")
		}
		if strings.IndexByte(s, 0) >= 0 {
			return specError(cat, c, "contains a NUL byte")
		}
		spec.Commands = append(spec.Commands, s)
	}
	return nil
}

func (spec *ImageSpec) setEnv(at string, v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return specError(at, v, "want a mapping of variable names to values")
	}
	fields, err := mappingFields(at, v)
	if err != nil {
		return err
	}
	spec.Env = make(map[string]string, len(fields))
	for k, kv := range fields {
		val, err := text(at+"."+k, kv.value)
		if err != nil {
			return err
		}
		if err := wire.CheckEnv(map[string]string{k: val}); err != nil {
			return specError(at+"."+k, kv.key, "%s", wire.DetailOf(err).Message)
		}
		spec.Env[k] = val
	}
	spec.EnvKeys = slices.Sorted(maps.Keys(spec.Env))
	return nil
}

func (spec *ImageSpec) setFiles(at string, v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return specError(at, v, "want a mapping of workspace paths to contents")
	}
	fields, err := mappingFields(at, v)
	if err != nil {
		return err
	}
	if len(fields) > maxBuildFiles {
		return specError(at, v, "%d files, at most %d", len(fields), maxBuildFiles)
	}
	for _, p := range slices.Sorted(maps.Keys(fields)) {
		kv := fields[p]
		fat := at + "." + p
		if p == "" || len(p) > 4096 || strings.IndexByte(p, 0) >= 0 || path.IsAbs(p) || path.Clean(p) != p ||
			p == "." || p == ".." || strings.HasPrefix(p, "../") {
			return specError(fat, kv.key, "want a clean relative path inside the workspace (no leading /, no .., no trailing /)")
		}
		content, err := text(fat, kv.value)
		if err != nil {
			return err
		}
		spec.Files = append(spec.Files, runtime.File{Path: p, Content: content})
	}
	return nil
}

func (spec *ImageSpec) setResources(at string, v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return specError(at, v, "want a mapping with cpu and memory")
	}
	fields, err := mappingFields(at, v)
	if err != nil {
		return err
	}
	for k, kv := range fields {
		rat := at + "." + k
		var dst *string
		switch k {
		case "cpu":
			dst = &spec.Resources.CPU
		case "memory":
			dst = &spec.Resources.Memory
		case "requests", "limits":
			return specError(rat, kv.key, "berth takes resources as {cpu, memory}, the build sandbox's limits; write resources: {cpu: \"2\", memory: 4Gi}")
		default:
			return specError(rat, kv.key, "unknown field; resources has cpu and memory")
		}
		if *dst, err = text(rat, kv.value); err != nil {
			return err
		}
	}
	if err := checkResources(&spec.Resources); err != nil {
		return specError(at, v, "%s", strings.TrimPrefix(wire.DetailOf(err).Message, "resources."))
	}
	return nil
}

// text returns a scalar's text: strings, and numbers and booleans as
// written (env values are often numbers). Null, lists and mappings are
// refused.
func text(at string, n *yaml.Node) (string, error) {
	switch {
	case n.Kind != yaml.ScalarNode:
		return "", specError(at, n, "want a single value, not a list or mapping")
	case n.Tag == "!!null":
		return "", specError(at, n, "has no value")
	case n.Tag == "!!binary":
		return "", specError(at, n, "binary values are not accepted; write text")
	}
	return n.Value, nil
}
