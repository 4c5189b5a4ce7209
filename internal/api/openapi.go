package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/berth-mcp/berth/internal/schema"
	"github.com/berth-mcp/berth/internal/version"
	"github.com/berth-mcp/berth/internal/wire"
)

func schemaOf(v any) *jsonschema.Schema {
	if v == nil {
		return nil
	}
	s, err := schema.Of(reflect.TypeOf(v))
	if err != nil {
		return &jsonschema.Schema{Description: "schema unavailable: " + err.Error()}
	}
	return s
}

// optionalBody marks a route's request body as optional in the document.
type optionalBody struct{ body any }

// queryTypes are the JSON Schema types of query parameters that are not
// strings.
var queryTypes = map[string]string{"wait_seconds": "number", "tail": "integer"}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// openAPIPath turns a chi pattern into an OpenAPI path: the trailing
// wildcard becomes a {path} parameter.
func openAPIPath(pattern string) string {
	if strings.HasSuffix(pattern, "/*") {
		return strings.TrimSuffix(pattern, "*") + "{path}"
	}
	return pattern
}

// buildOpenAPI builds the OpenAPI 3.1 document from the route tables.
func (s *server) buildOpenAPI() ([]byte, error) {
	errorSchema := schemaOf(wire.Error{})
	paths := map[string]map[string]any{}
	add := func(rt route, public bool) {
		p := openAPIPath(rt.pattern)
		var params []map[string]any
		for _, m := range pathParam.FindAllStringSubmatch(p, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]string{"type": "string"}})
		}
		for _, q := range rt.query {
			typ := queryTypes[q]
			if typ == "" {
				typ = "string"
			}
			params = append(params, map[string]any{"name": q, "in": "query", "required": false, "schema": map[string]string{"type": typ}})
		}
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		for _, m := range rt.methods() {
			op := map[string]any{
				"summary":     rt.summary,
				"operationId": operationID(m, rt.pattern),
				"security":    []map[string][]string{{"bearer": {}}, {"sessionToken": {}}},
				"responses": map[string]any{
					"200":     response("success", schemaOf(rt.response)),
					"default": response("error", errorSchema),
				},
			}
			if public {
				op["security"] = []map[string][]string{}
			}
			if params != nil {
				op["parameters"] = params
			}
			if rt.request != nil {
				body, required := rt.request, true
				if o, ok := body.(optionalBody); ok {
					body, required = o.body, false
				}
				op["requestBody"] = map[string]any{
					"required": required,
					"content":  map[string]any{"application/json": map[string]any{"schema": schemaOf(body)}},
				}
			}
			paths[p][strings.ToLower(m)] = op
		}
	}
	for _, rt := range s.publicRoutes() {
		add(rt, true)
	}
	for _, rt := range s.routes() {
		add(rt, false)
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
	return json.MarshalIndent(doc, "", "  ")
}

// serveOpenAPI serves the document built at start.
func (s *server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	if s.openAPIErr != nil {
		wire.WriteError(w, fmt.Errorf("build the OpenAPI document: %w", s.openAPIErr))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.openAPI)
}

func response(desc string, schema *jsonschema.Schema) map[string]any {
	r := map[string]any{"description": desc}
	if schema != nil {
		r["content"] = map[string]any{"application/json": map[string]any{"schema": schema}}
	}
	return r
}

// operationID names an operation after its method and the words of its
// pattern: GET /api/servers/{id}/logs is getServersIdLogs.
func operationID(method, pattern string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	words := strings.FieldsFunc(pattern, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	})
	for i, w := range words {
		if i == 0 && w == "api" {
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}
