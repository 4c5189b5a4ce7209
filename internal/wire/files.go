package wire

// FileEntry is one entry of GET /api/fs/ls.
type FileEntry struct {
	Name    string `json:"name"`
	Path    string `json:"path"` // relative to the workspace
	Type    string `json:"type"` // file, dir, symlink, other
	Size    int64  `json:"size"`
	Mode    string `json:"mode"`
	ModTime string `json:"mod_time"`
	Target  string `json:"target,omitempty"` // symlink target
}

// ListResult is the answer of GET /api/fs/ls.
type ListResult struct {
	Path      string      `json:"path"`
	Entries   []FileEntry `json:"entries"`
	Truncated bool        `json:"truncated,omitempty"`
}

// ReadResult is the answer of GET /api/fs/cat and of the read_file tool.
// With lines set (line mode) Offset and Limit count lines, 1-indexed
// StartLine; otherwise they count bytes.
type ReadResult struct {
	Path       string `json:"path"`
	Content    string `json:"content"`
	Size       int64  `json:"size"`        // whole file, bytes
	Offset     int64  `json:"offset"`      // first byte (byte mode) or line (line mode) returned
	Returned   int64  `json:"returned"`    // bytes or lines returned
	TotalLines int64  `json:"total_lines"` // line mode only
	EOF        bool   `json:"eof"`         // the end of the file was reached
	Binary     bool   `json:"binary,omitempty"`
}

// WriteFileRequest is the body of POST /api/fs/write.
type WriteFileRequest struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	// Mode is an octal permission string such as "0644"; default 0644.
	Mode string `json:"mode,omitempty"`
	// MakeParents creates missing parent directories.
	MakeParents bool `json:"make_parents,omitempty"`
}

// MkdirRequest is the body of POST /api/fs/mkdir.
type MkdirRequest struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty"`
}

// FileResult is the answer of calls that change one path.
type FileResult struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes,omitempty"`
	Lines int    `json:"lines,omitempty"`
}

// CreateFileRequest is the create_file tool (IdeGYM): it refuses to
// overwrite an existing file unless Overwrite is set.
type CreateFileRequest struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Overwrite bool   `json:"overwrite,omitempty"`
}

// EditFileRequest is the edit_file tool (IdeGYM): replace lines
// StartLine..EndLine (1-indexed, inclusive) with NewContent; EndLine =
// StartLine-1 inserts before StartLine without removing anything.
type EditFileRequest struct {
	Path       string `json:"path"`
	StartLine  int    `json:"start_line"`
	EndLine    int    `json:"end_line"`
	NewContent string `json:"new_content"`
}

// PatchFileRequest is the patch_file tool (IdeGYM): apply a unified diff to
// one file. Either every hunk applies or the file is left untouched.
type PatchFileRequest struct {
	Path  string `json:"path"`
	Patch string `json:"patch"`
}

// ReadFileRequest is the agent MCP read_file tool: lines Offset (1-indexed,
// default 1) for Limit lines (default 2000).
type ReadFileRequest struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset,omitempty"`
	Limit  int64  `json:"limit,omitempty"`
}

// RewardRequest is the body of POST /api/rewards/test.
type RewardRequest struct {
	// Command runs the tests; empty uses the agent's configured
	// --test-command.
	Command string `json:"command,omitempty"`
	// JUnitPaths are glob patterns (workspace-relative) of the JUnit XML
	// reports the command writes; default "**/junit*.xml" style search is
	// up to the agent configuration.
	JUnitPaths     []string `json:"junit_paths,omitempty"`
	CommandTimeout *float64 `json:"command_timeout,omitempty"`
	// Operation is berth's, as for BashRequest.
	Operation
}

// RewardResult is the answer of POST /api/rewards/test.
type RewardResult struct {
	Total   int        `json:"total"`
	Passed  int        `json:"passed"`
	Failed  int        `json:"failed"`
	Skipped int        `json:"skipped"`
	Errors  int        `json:"errors"`
	Reports []string   `json:"reports"` // the JUnit files that were read
	Bash    BashResult `json:"bash"`
}
