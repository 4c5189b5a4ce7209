// Package schema infers the JSON Schemas of berth's request and response
// types, for the OpenAPI document and the MCP tool definitions, so both
// describe the same types the same way.
package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/berth-mcp/berth/internal/wire"
)

// typeSchemas gives the schema of types whose JSON form is not what their
// Go shape suggests.
func typeSchemas() map[reflect.Type]*jsonschema.Schema {
	return map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[time.Time](): {Type: "string", Format: "date-time"},
		// An object schema, not the bare `true` an empty schema encodes
		// to: MCP clients require tool schema properties to be objects.
		// berth keeps JSON objects it passes on (results, tool schemas,
		// content items) as raw JSON.
		reflect.TypeFor[json.RawMessage]():    {Type: "object"},
		reflect.TypeFor[wire.OptionalInt64](): {AnyOf: []*jsonschema.Schema{{Type: "integer"}, {Type: "null"}}},
	}
}

// For returns the schema of T.
func For[T any]() (*jsonschema.Schema, error) {
	return Of(reflect.TypeFor[T]())
}

// Of returns the schema of t.
func Of(t reflect.Type) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: typeSchemas()})
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", t, err)
	}
	return s, nil
}
