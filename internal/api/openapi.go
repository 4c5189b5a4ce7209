package api

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/berth-mcp/berth/internal/version"
	"github.com/berth-mcp/berth/internal/wire"
)

// schemaTypes gives the JSON Schema of types whose JSON form is not what
// their Go shape suggests.
var schemaTypes = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[time.Time]():          {Type: "string", Format: "date-time"},
	reflect.TypeFor[json.RawMessage]():    {},
	reflect.TypeFor[wire.OptionalInt64](): {Types: []string{"integer", "null"}},
}

func schemaOf(v any) *jsonschema.Schema {
	if v == nil {
		return nil
	}
	s, err := jsonschema.ForType(reflect.TypeOf(v), &jsonschema.ForOptions{TypeSchemas: schemaTypes, IgnoreInvalidTypes: true})
	if err != nil {
		return &jsonschema.Schema{Description: "schema unavailable: " + err.Error()}
	}
	return s
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// openAPIPath turns a chi pattern into an OpenAPI path: the trailing
// wildcard becomes a {path} parameter.
func openAPIPath(pattern string) string {
	if strings.HasSuffix(pattern, "/*") {
		return strings.TrimSuffix(pattern, "*") + "{path}"
	}
	return pattern
}

// openAPI builds the OpenAPI 3.1 document from the route table once and
// serves it.
func (s *server) openAPI() http.Handler {
	errorSchema := schemaOf(wire.Error{})
	paths := map[string]map[string]any{}
	for _, rt := range s.routes() {
		p := openAPIPath(rt.pattern)
		var params []map[string]any
		for _, m := range pathParam.FindAllStringSubmatch(p, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]string{"type": "string"}})
		}
		for _, q := range rt.query {
			params = append(params, map[string]any{"name": q, "in": "query", "required": false, "schema": map[string]string{"type": "string"}})
		}
		op := map[string]any{
			"summary":     rt.summary,
			"operationId": operationID(rt.method, rt.pattern),
			"security":    []map[string][]string{{"bearer": {}}, {"sessionToken": {}}},
			"responses": map[string]any{
				"200":     response("success", schemaOf(rt.response)),
				"default": response("error", errorSchema),
			},
		}
		if params != nil {
			op["parameters"] = params
		}
		if rt.request != nil {
			op["requestBody"] = map[string]any{
				"required": true,
				"content":  map[string]any{"application/json": map[string]any{"schema": schemaOf(rt.request)}},
			}
		}
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		methods := []string{rt.method}
		if rt.method == "*" {
			methods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
		}
		for _, m := range methods {
			paths[p][strings.ToLower(m)] = op
		}
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]string{"title": "berth REST API", "version": version.Version},
		"paths":   paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{
				"bearer":       map[string]string{"type": "http", "scheme": "bearer"},
				"sessionToken": map[string]string{"type": "apiKey", "in": "header", "name": "Berth-Session-Token"},
			},
		},
	}
	body, err := json.MarshalIndent(doc, "", "  ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err != nil {
			wire.WriteError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
}

func response(desc string, schema *jsonschema.Schema) map[string]any {
	r := map[string]any{"description": desc}
	if schema != nil {
		r["content"] = map[string]any{"application/json": map[string]any{"schema": schema}}
	}
	return r
}

func operationID(method, pattern string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(strings.ReplaceAll(method, "*", "any")))
	for _, part := range strings.Split(pattern, "/") {
		part = strings.Trim(part, "{}*")
		if part == "" || part == "api" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + strings.ReplaceAll(part[1:], "_", ""))
	}
	return b.String()
}
