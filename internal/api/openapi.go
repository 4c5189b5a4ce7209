package api

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/schema"
	"github.com/berth-mcp/berth/internal/version"
	"github.com/berth-mcp/berth/internal/wire"
)

func schemaOf(v any) *jsonschema.Schema {
	if v == nil {
		return nil
	}
	return schemaOfType(reflect.TypeOf(v))
}

func schemaOfType(t reflect.Type) *jsonschema.Schema {
	s, err := schema.Of(t)
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

// buildOpenAPI builds the OpenAPI 3.1 document from the route tables.
func (s *server) buildOpenAPI() ([]byte, error) {
	errorSchema := schemaOf(wire.Error{})
	paths := map[string]map[string]any{}
	for _, o := range s.cat.Ops() {
		if o.REST.Method != "" {
			paths[openAPIPath(o.REST.Path)] = map[string]any{}
		}
	}
	add := func(rt route, public bool) {
		p := openAPIPath(rt.pattern)
		var params []map[string]any
		for _, m := range pathParam.FindAllStringSubmatch(p, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]string{"type": "string"}})
		}
		for _, q := range rt.query {
			params = append(params, map[string]any{"name": q, "in": "query", "required": false, "schema": map[string]string{"type": "string"}})
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
			paths[p][strings.ToLower(m)] = op
		}
	}
	for _, rt := range s.publicRoutes() {
		add(rt, true)
	}
	for _, o := range s.cat.Ops() {
		if o.REST.Method != "" {
			paths[openAPIPath(o.REST.Path)][strings.ToLower(o.REST.Method)] = operationDoc(o, errorSchema)
		}
	}
	for _, rt := range s.rawRoutes() {
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

// operationID names a route outside the catalogue after its method and
// the words of its pattern, the way the catalogue names operations: GET
// /healthz is get_healthz.
func operationID(method, pattern string) string {
	words := strings.FieldsFunc(strings.ToLower(method+" "+pattern), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
	if len(words) > 1 && words[1] == "api" {
		words = slices.Delete(words, 1, 2)
	}
	return strings.Join(words, "_")
}

// operationDoc documents one operation of the catalogue: its path and
// query parameters and its body are the input type's fields, split the
// way the REST adapter reads them.
func operationDoc(o catalog.Op, errorSchema *jsonschema.Schema) map[string]any {
	in := schemaOfType(o.Input())
	var params []map[string]any
	take := func(name, where string) {
		prop := in.Properties[name]
		delete(in.Properties, name)
		in.Required = slices.DeleteFunc(in.Required, func(r string) bool { return r == name })
		p := map[string]any{"name": name, "in": where, "required": where == "path", "schema": prop}
		if prop != nil && prop.Description != "" {
			p["description"] = prop.Description
		}
		params = append(params, p)
	}
	for _, name := range o.REST.PathParams() {
		take(name, "path")
	}
	for _, name := range o.REST.Query {
		take(name, "query")
	}
	doc := map[string]any{
		"summary":     o.Summary,
		"description": o.Describe(),
		"operationId": o.Name,
		"security":    []map[string][]string{{"bearer": {}}, {"sessionToken": {}}},
		"responses": map[string]any{
			"200":     response("success", schemaOfType(o.Output())),
			"default": response("error", errorSchema),
		},
	}
	if params != nil {
		doc["parameters"] = params
	}
	if o.REST.HasBody() && len(in.Properties) > 0 {
		doc["requestBody"] = map[string]any{
			"required": len(in.Required) > 0,
			"content":  map[string]any{"application/json": map[string]any{"schema": in}},
		}
	}
	return doc
}

// OpenAPI is the OpenAPI document of berth's REST API without a running
// server, for the generated reference documentation.
func OpenAPI() ([]byte, error) {
	s := &server{cat: catalog.New(nil), log: slog.New(slog.DiscardHandler)}
	return s.buildOpenAPI()
}
