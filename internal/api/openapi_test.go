package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// openAPIDoc is the part of the document the tests read.
type openAPIDoc struct {
	OpenAPI string `json:"openapi"`
	Info    struct {
		Title, Version string
	} `json:"info"`
	Paths      map[string]map[string]openAPIOp `json:"paths"`
	Components struct {
		SecuritySchemes map[string]json.RawMessage `json:"securitySchemes"`
	} `json:"components"`
}

type openAPIOp struct {
	OperationID string                `json:"operationId"`
	Summary     string                `json:"summary"`
	Security    []map[string][]string `json:"security"`
	Parameters  []struct {
		Name, In string
		Required bool
	} `json:"parameters"`
	RequestBody *struct {
		Required bool `json:"required"`
		Content  map[string]struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
	Responses map[string]json.RawMessage `json:"responses"`
}

// The document is served without a credential, and it and the router
// describe the same routes: every routed path and method is documented and
// every documented one is routed.
func TestOpenAPIMatchesRouter(t *testing.T) {
	e := newTestServer(t)
	r := e.send(t, "GET", "/api/openapi.json", nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/openapi.json: %d %s %.200s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var doc openAPIDoc
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("the document is not valid JSON: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || doc.Info.Title == "" || doc.Info.Version == "" {
		t.Fatalf("openapi %q, info %+v: want 3.1.0 with a title and version", doc.OpenAPI, doc.Info)
	}
	for _, s := range []string{"bearer", "sessionToken"} {
		if doc.Components.SecuritySchemes[s] == nil {
			t.Errorf("security scheme %s is missing", s)
		}
	}

	// What the router serves, as OpenAPI paths: chi's {id} is OpenAPI's
	// {id}, and a trailing /* is the {path} parameter.
	routes, ok := e.handler.(chi.Routes)
	if !ok {
		t.Fatalf("api.NewServer returned %T, not a chi router", e.handler)
	}
	routed := map[string][]string{}
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if route == "/mcp" {
			return nil // the MCP endpoint is mounted beside the REST API, not part of it
		}
		p := route
		if strings.HasSuffix(p, "/*") {
			p = strings.TrimSuffix(p, "*") + "{path}"
		}
		routed[p] = append(routed[p], strings.ToLower(method))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/servers/{server_id}/bash", "/api/forward/{client_id}/{server_id}/{path}", "/api/openapi.json"} {
		if routed[p] == nil {
			t.Fatalf("the walk did not find %s: %v", p, routed)
		}
	}
	for p, methods := range routed {
		for _, m := range methods {
			if _, ok := doc.Paths[p][m]; !ok {
				t.Errorf("%s %s is routed but not documented", strings.ToUpper(m), p)
			}
		}
	}
	for p, ops := range doc.Paths {
		for m := range ops {
			if !slices.Contains(routed[p], m) {
				t.Errorf("%s %s is documented but not routed", strings.ToUpper(m), p)
			}
		}
	}
	for _, m := range []string{"connect", "trace"} {
		if slices.Contains(routed["/api/forward/{client_id}/{server_id}/{path}"], m) {
			t.Errorf("%s is forwarded into sandboxes", strings.ToUpper(m))
		}
	}
}

// Each operation is well formed: a unique operationId, every path
// parameter declared, a JSON schema for bodies, and security on every
// route but the public ones.
func TestOpenAPIOperations(t *testing.T) {
	e := newTestServer(t)
	var doc openAPIDoc
	e.call(t, "", "GET", "/api/openapi.json", nil, http.StatusOK, &doc)
	public := []string{"/healthz", "/readyz", "/api/openapi.json"}
	ids := map[string]string{}
	idRE := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	paramRE := regexp.MustCompile(`\{([a-z_]+)\}`)
	for p, ops := range doc.Paths {
		for m, op := range ops {
			where := strings.ToUpper(m) + " " + p
			if !idRE.MatchString(op.OperationID) {
				t.Errorf("%s: operationId %q", where, op.OperationID)
			}
			if other, dup := ids[op.OperationID]; dup {
				t.Errorf("%s and %s share operationId %q", where, other, op.OperationID)
			}
			ids[op.OperationID] = where
			if op.Summary == "" {
				t.Errorf("%s has no summary", where)
			}
			if op.Responses["200"] == nil || op.Responses["default"] == nil {
				t.Errorf("%s lacks the 200 or default response", where)
			}
			for _, want := range paramRE.FindAllStringSubmatch(p, -1) {
				if !slices.ContainsFunc(op.Parameters, func(q struct {
					Name, In string
					Required bool
				}) bool {
					return q.Name == want[1] && q.In == "path" && q.Required
				}) {
					t.Errorf("%s does not declare its path parameter %s", where, want[1])
				}
			}
			if op.RequestBody != nil && len(op.RequestBody.Content["application/json"].Schema) == 0 {
				t.Errorf("%s has a request body without a JSON schema", where)
			}
			if isPublic := slices.Contains(public, p); isPublic != (len(op.Security) == 0) {
				t.Errorf("%s: security %v, public %v", where, op.Security, isPublic)
			}
		}
	}
	// Restart takes an optional body; the others need theirs.
	if rb := doc.Paths["/api/servers/{server_id}/restart"]["post"].RequestBody; rb == nil || rb.Required {
		t.Errorf("restart: request body %+v, want an optional one", rb)
	}
	if rb := doc.Paths["/api/servers"]["post"].RequestBody; rb == nil || !rb.Required {
		t.Errorf("start server: request body %+v, want a required one", rb)
	}
	// Spot checks that the schemas come from the real types.
	var body struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	json.Unmarshal(doc.Paths["/api/servers"]["post"].RequestBody.Content["application/json"].Schema, &body)
	for _, f := range []string{"client_id", "image_tag", "reuse_strategy", "wait_seconds"} {
		if body.Properties[f] == nil {
			t.Errorf("POST /api/servers request schema lacks %s: %v", f, body.Properties)
		}
	}
}

// /healthz and /readyz need no credential; /readyz names the runtime.
func TestHealth(t *testing.T) {
	e := newTestServer(t)
	var health struct{ Status string }
	e.call(t, "", "GET", "/healthz", nil, http.StatusOK, &health)
	if health.Status != "ok" {
		t.Errorf("healthz: %+v", health)
	}
	var ready struct {
		Status, Runtime, Isolation, Warning string
		Confined                            bool
	}
	e.call(t, "", "GET", "/readyz", nil, http.StatusOK, &ready)
	if ready.Status != "ok" || ready.Runtime != "local" || !strings.HasPrefix(ready.Isolation, "full:") || !ready.Confined || ready.Warning != "" {
		t.Errorf("readyz: %+v, want ok on the local runtime with full isolation", ready)
	}
}
