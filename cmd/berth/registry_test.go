package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// TestServerJSONIsAValidRegistryEntry validates the repository's
// server.json (the MCP registry entry) against the registry's published
// schema: the copy shared with the team when it is there, else the one
// kept in testdata.
func TestServerJSONIsAValidRegistryEntry(t *testing.T) {
	schemaPath := filepath.Join("..", "..", "..", "shared", "schemas", "server.schema.2025-12-11.json")
	if _, err := os.Stat(schemaPath); err != nil {
		schemaPath = filepath.Join("testdata", "server.schema.2025-12-11.json")
	}
	raw, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	var schema jsonschema.Schema
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatalf("schema %s: %v", schemaPath, err)
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		t.Fatalf("resolve schema: %v", err)
	}
	entryRaw, err := os.ReadFile(filepath.Join("..", "..", "server.json"))
	if err != nil {
		t.Fatal(err)
	}
	var entry map[string]any
	if err := json.Unmarshal(entryRaw, &entry); err != nil {
		t.Fatalf("server.json: %v", err)
	}
	if err := resolved.Validate(entry); err != nil {
		t.Fatalf("server.json does not validate: %v", err)
	}
	// The schema must be able to refuse: a broken copy of the entry fails.
	broken := map[string]any{"name": "no slash", "description": entry["description"]}
	if err := resolved.Validate(broken); err == nil {
		t.Fatal("the schema accepted an entry without a version and with a bad name")
	}
	remotes, _ := entry["remotes"].([]any)
	if len(remotes) == 0 || remotes[0].(map[string]any)["type"] != "streamable-http" {
		t.Fatalf("server.json must offer the streamable-HTTP remote, got %v", entry["remotes"])
	}
}
