package mcpserver

import (
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// objectProperties gives every top-level property of s that accepts any
// JSON value (Go's any or json.RawMessage) an object schema instead of the
// boolean schema `true` it marshals to. Both mean the same, but MCP's
// schema types a tool's inputSchema and outputSchema properties as objects,
// and the TypeScript SDK (and so every client built on it) rejects a whole
// tools/list result when one property schema is a boolean.
func objectProperties(s *jsonschema.Schema) {
	for name, p := range s.Properties {
		if p == nil || reflect.ValueOf(*p).IsZero() {
			s.Properties[name] = &jsonschema.Schema{Description: "any JSON value"}
		}
	}
}
