// Package edit owns IdeGYM's file edit tools (create_file, edit_file,
// patch_file) and the pure content transforms behind them: replacing a
// range of lines and applying a one-file unified diff. The Editor works
// through an *os.Root so every path stays inside the workspace, and it
// writes through a temporary file and a rename so that a reader never sees
// a half-written file and a failed edit leaves the file untouched.
package edit
