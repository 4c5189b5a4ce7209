package catalog_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/catalog"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/schema"
	"github.com/berth-mcp/berth/internal/wire"
)

// The table is well formed: unique names, tools and routes; every
// parameter a field of the input; every required field reachable on
// REST; schemas that can be inferred.
func TestCatalogIsConsistent(t *testing.T) {
	cat := catalog.New(nil) // the table only; nothing is called
	names, tools, routes := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, o := range cat.Ops() {
		if o.Name == "" || o.Summary == "" || o.Title == "" || o.Action == "" {
			t.Errorf("%q lacks a name, summary, title or action", o.Name)
		}
		for _, a := range o.Also {
			// The reference says when a conditional action applies.
			if a.Action == "" || (a.When != nil) != (a.Doc != "") {
				t.Errorf("%s: Also %+v needs an action, and a Doc exactly when it has a When", o.Name, a.Action)
			}
		}
		for what, set := range map[string]map[string]bool{"name " + o.Name: names, "tool " + o.Tool(): tools} {
			key := strings.SplitN(what, " ", 2)[1]
			if set[key] {
				t.Errorf("%s is declared twice", what)
			}
			set[key] = true
		}
		if o.Task && (!o.LongRunning || o.Output() != reflect.TypeFor[orchestrator.Operation]()) {
			t.Errorf("%s: a task operation must be long-running and answer one Operation", o.Name)
		}
		in, err := schema.Of(o.Input())
		if err != nil {
			t.Errorf("%s: input schema: %v", o.Name, err)
			continue
		}
		if _, err := schema.Of(o.MCPOutput()); err != nil {
			t.Errorf("%s: output schema: %v", o.Name, err)
		}
		if o.REST.Method == "" {
			continue
		}
		route := o.REST.Method + " " + o.REST.Path
		if routes[route] {
			t.Errorf("%s: route %s is declared twice", o.Name, route)
		}
		routes[route] = true
		params := append(o.REST.PathParams(), o.REST.Query...)
		for _, p := range params {
			if in.Properties[p] == nil {
				t.Errorf("%s: parameter %s is not a field of its input", o.Name, p)
			}
		}
		for _, req := range in.Required {
			if !slices.Contains(params, req) && !o.REST.HasBody() {
				t.Errorf("%s: required field %s cannot be given on %s", o.Name, req, route)
			}
		}
	}
}

// Decode refuses, naming the field, what every adapter would refuse.
func TestDecodeErrors(t *testing.T) {
	cat := catalog.New(nil)
	logs, _ := cat.Op("get_server_logs")
	bash, _ := cat.Op("run_bash_command")
	cases := []struct {
		name   string
		op     catalog.Op
		object string
		params []catalog.Param
		words  []string
	}{
		{"unknown field", logs, `{"server_id":"s","colour":1}`, nil, []string{"unknown field", "colour"}},
		{"wrong type", logs, `{"server_id":"s","tail":"ten"}`, nil, []string{`"tail"`, "an integer"}},
		{"missing required", logs, `{"tail":3}`, nil, []string{"missing required field", "server_id"}},
		{"null", logs, `null`, nil, []string{"JSON object"}},
		{"not an object", logs, `[1]`, nil, []string{"JSON object"}},
		{"trailing data", logs, `{"server_id":"s"} {}`, nil, []string{"after the JSON object"}},
		{"query not a number", logs, ``, []catalog.Param{{Name: "server_id", Value: "s", In: "path"}, {Name: "tail", Value: "x", In: "query"}}, []string{`field "tail"`, "integer", `"x"`}},
		{"query and body", logs, `{"tail":3}`, []catalog.Param{{Name: "server_id", Value: "s", In: "path"}, {Name: "tail", Value: "4", In: "query"}}, []string{"tail", "both"}},
		{"path and body differ", bash, `{"server_id":"a","command":"true"}`, []catalog.Param{{Name: "server_id", Value: "b", In: "path"}}, []string{"server_id", `"b"`, "path"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.op.Decode([]byte(c.object), c.params)
			if err == nil {
				t.Fatal("accepted")
			}
			d := wire.DetailOf(err)
			if d.Code != wire.CodeBadRequest {
				t.Errorf("code %s, want bad_request: %v", d.Code, err)
			}
			for _, w := range c.words {
				if !strings.Contains(d.Message, w) {
					t.Errorf("message %q does not name %q", d.Message, w)
				}
			}
		})
	}
}

// What is given outside the object fills the input; the same value in
// the body as in the path is accepted.
func TestDecodeParams(t *testing.T) {
	logs, _ := catalog.New(nil).Op("get_server_logs")
	in, err := logs.Decode(nil, []catalog.Param{{Name: "server_id", Value: "s1", In: "path"}, {Name: "tail", Value: "7", In: "query"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := *in.(*catalog.LogsInput); got != (catalog.LogsInput{ServerID: "s1", Tail: 7}) {
		t.Fatalf("decoded %+v", got)
	}
	bash, _ := catalog.New(nil).Op("run_bash_command")
	if _, err := bash.Decode([]byte(`{"server_id":"s1","command":"true"}`), []catalog.Param{{Name: "server_id", Value: "s1", In: "path"}}); err != nil {
		t.Fatalf("the same server_id in body and path: %v", err)
	}
}
