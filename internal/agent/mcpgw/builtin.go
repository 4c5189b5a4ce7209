package mcpgw

import (
	"context"
	"fmt"

	"github.com/berth-mcp/berth/internal/wire"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Backend is what the built-in tools call.
type Backend interface {
	CreateFile(ctx context.Context, req wire.CreateFileRequest) (wire.FileResult, error)
	EditFile(ctx context.Context, req wire.EditFileRequest) (wire.FileResult, error)
	PatchFile(ctx context.Context, req wire.PatchFileRequest) (wire.FileResult, error)
	ReadFile(ctx context.Context, req wire.ReadFileRequest) (wire.ReadResult, error)
	Bash(ctx context.Context, session string, req wire.SessionExecRequest) (wire.BashResult, error)
}

// Built-in tool names. They win over upstream tools of the same name.
const (
	toolCreateFile = "create_file"
	toolEditFile   = "edit_file"
	toolPatchFile  = "patch_file"
	toolReadFile   = "read_file"
	toolBash       = "bash"
)

// DefaultSession is the bash session used when a call names none.
const DefaultSession = "default"

func builtinNames() []string {
	return []string{toolBash, toolReadFile, toolCreateFile, toolEditFile, toolPatchFile}
}

type createFileInput struct {
	Path      string `json:"path" jsonschema:"file path, relative to the workspace root"`
	Content   string `json:"content" jsonschema:"the complete content of the new file"`
	Overwrite bool   `json:"overwrite,omitempty" jsonschema:"replace the file if it already exists (default false: fail instead)"`
}

type editFileInput struct {
	Path       string `json:"path" jsonschema:"file path, relative to the workspace root"`
	StartLine  int    `json:"start_line" jsonschema:"first line to replace, 1-indexed"`
	EndLine    int    `json:"end_line" jsonschema:"last line to replace, inclusive; start_line-1 inserts before start_line without removing anything"`
	NewContent string `json:"new_content" jsonschema:"text that replaces the lines; empty deletes them"`
}

type patchFileInput struct {
	Path  string `json:"path" jsonschema:"file path, relative to the workspace root"`
	Patch string `json:"patch" jsonschema:"unified diff for this one file (hunks starting with @@); either every hunk applies or the file is left untouched"`
}

type readFileInput struct {
	Path   string `json:"path" jsonschema:"file path, relative to the workspace root"`
	Offset int64  `json:"offset,omitempty" jsonschema:"first line to return, 1-indexed (default 1)"`
	Limit  int64  `json:"limit,omitempty" jsonschema:"maximum number of lines to return (default 2000)"`
}

type bashInput struct {
	Command string  `json:"command" jsonschema:"bash command line to run"`
	Timeout float64 `json:"timeout,omitempty" jsonschema:"seconds to wait for the command before it is interrupted (default 60)"`
	Session string  `json:"session,omitempty" jsonschema:"name of the persistent shell session to run in; working directory and variables carry over between calls in the same session"`
}

func boolPtr(b bool) *bool { return &b }

// The handlers return backend errors unchanged: the SDK turns a plain error
// from a typed handler into a tool result with IsError set and the error
// text as content, which the agent can read, rather than a protocol error.

// addBuiltins registers the built-in tools on s.
func addBuiltins(s *mcp.Server, b Backend) error {
	createSchema, err := inputSchema[createFileInput](nil)
	if err != nil {
		return err
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:  toolCreateFile,
		Title: "Create file",
		Description: "Create a file with the given content, creating missing parent directories. " +
			"Fails if the file exists unless overwrite is true. Use edit_file or patch_file to change part of an existing file.",
		InputSchema: createSchema,
		// Overwriting replaces a file wholesale; the same call twice leaves
		// the same file.
		Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in createFileInput) (*mcp.CallToolResult, wire.FileResult, error) {
		res, err := b.CreateFile(ctx, wire.CreateFileRequest{Path: in.Path, Content: in.Content, Overwrite: in.Overwrite})
		return nil, res, err
	})

	editSchema, err := inputSchema[editFileInput](map[string]float64{"start_line": 1, "end_line": 0})
	if err != nil {
		return err
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:  toolEditFile,
		Title: "Edit file lines",
		Description: "Replace lines start_line..end_line (1-indexed, inclusive) of a file with new_content. " +
			"Set end_line to start_line-1 to insert before start_line; use an empty new_content to delete lines. " +
			"Read the file first: line numbers shift after every edit.",
		InputSchema: editSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in editFileInput) (*mcp.CallToolResult, wire.FileResult, error) {
		res, err := b.EditFile(ctx, wire.EditFileRequest{Path: in.Path, StartLine: in.StartLine, EndLine: in.EndLine, NewContent: in.NewContent})
		return nil, res, err
	})

	patchSchema, err := inputSchema[patchFileInput](nil)
	if err != nil {
		return err
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:  toolPatchFile,
		Title: "Patch file",
		Description: "Apply a unified diff to one file. All hunks must apply; otherwise nothing is changed " +
			"and the error says which hunk failed.",
		InputSchema: patchSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in patchFileInput) (*mcp.CallToolResult, wire.FileResult, error) {
		res, err := b.PatchFile(ctx, wire.PatchFileRequest{Path: in.Path, Patch: in.Patch})
		return nil, res, err
	})

	readSchema, err := inputSchema[readFileInput](map[string]float64{"offset": 0, "limit": 0})
	if err != nil {
		return err
	}
	mcp.AddTool(s, &mcp.Tool{
		Name:  toolReadFile,
		Title: "Read file",
		Description: "Read a text file by lines: limit lines (default 2000) starting at line offset (1-indexed, default 1). " +
			"The result tells the total line count and whether the end of the file was reached; read on with a larger offset.",
		InputSchema: readSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in readFileInput) (*mcp.CallToolResult, wire.ReadResult, error) {
		res, err := b.ReadFile(ctx, wire.ReadFileRequest{Path: in.Path, Offset: in.Offset, Limit: in.Limit})
		return nil, res, err
	})

	bashSchema, err := inputSchema[bashInput](map[string]float64{"timeout": 0})
	if err != nil {
		return err
	}
	bashSchema.Properties["session"].Default = []byte(`"` + DefaultSession + `"`)
	mcp.AddTool(s, &mcp.Tool{
		Name:  toolBash,
		Title: "Run bash",
		Description: "Run a bash command in a persistent shell session whose working directory starts at the workspace root. " +
			"cd and exported variables persist across calls in the same session. Returns stdout, stderr and exit_code; " +
			"a non-zero exit code is a normal result. Long output is truncated (see *_truncated_bytes). " +
			"Do not start interactive programs; run long-lived servers in the background (cmd > log 2>&1 &).",
		InputSchema: bashSchema,
		Annotations: &mcp.ToolAnnotations{DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(true)},
	}, func(ctx context.Context, _ *mcp.CallToolRequest, in bashInput) (*mcp.CallToolResult, wire.BashResult, error) {
		session := in.Session
		if session == "" {
			session = DefaultSession
		}
		res, err := b.Bash(ctx, session, wire.SessionExecRequest{Command: in.Command, Timeout: in.Timeout})
		return nil, res, err
	})
	return nil
}

// inputSchema infers the schema of T (descriptions come from jsonschema
// tags) and adds lower bounds that the tags cannot express, so that the SDK
// rejects nonsense numbers before they reach the backend.
func inputSchema[T any](minimums map[string]float64) (*jsonschema.Schema, error) {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		return nil, fmt.Errorf("infer input schema of %T: %w", *new(T), err)
	}
	for name, min := range minimums {
		p, ok := s.Properties[name]
		if !ok {
			return nil, fmt.Errorf("input schema of %T has no property %q", *new(T), name)
		}
		p.Minimum = &min
	}
	return s, nil
}
