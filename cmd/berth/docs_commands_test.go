package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The documentation's commands are checked, so that what README.md and
// docs/ tell people to type exists and works:
//   - every shell block parses (bash -n);
//   - every `berth` (or bin/berth) command in one names a real subcommand
//     and only flags it has; every `berth-load` flag exists; every `make`
//     target is in the Makefile;
//   - every JSON block is JSON;
//   - a block after `<!-- docs-test: run -->` is run against a real
//     `berth serve` (its URL in place of http://127.0.0.1:8080, bin/ and
//     .berth as `make run` leaves them), and with `; expect: TEXT` its
//     output must contain TEXT.

// docBlock is one fenced block of a Markdown file.
type docBlock struct {
	file, lang, text string
	line             int
	run              bool
	expect           string
}

var runMark = regexp.MustCompile(`^<!-- docs-test: run(?:; expect: (.*?))? -->$`)

func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	files := []string{filepath.Join("..", "..", "README.md")}
	more, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, more...)
	var out []docBlock
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		var (
			cur     *docBlock
			prev    string
			lineNum int
		)
		for sc.Scan() {
			lineNum++
			line := sc.Text()
			switch {
			case cur == nil && strings.HasPrefix(line, "```"):
				cur = &docBlock{file: filepath.Base(f), lang: strings.TrimPrefix(line, "```"), line: lineNum}
				if m := runMark.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
					cur.run, cur.expect = true, m[1]
				}
			case cur != nil && strings.HasPrefix(line, "```"):
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				cur.text += line + "\n"
			}
			if strings.TrimSpace(line) != "" {
				prev = line
			}
		}
		fh.Close()
	}
	return out
}

// commandLines joins continued lines and drops comments.
func commandLines(text string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(text, "\n") {
		if i := strings.Index(l, " # "); i >= 0 {
			l = l[:i]
		}
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	return out
}

// invocation finds `berth ...`, `berth-load ...` and `make ...` at a
// command position: a line's start, or after $( | ; && or a variable
// assignment.
var invocation = regexp.MustCompile(`(?:^|\$\(|[|;&]\s*|^\s*[A-Z_]+=\S*\s+)\s*(?:\S*/)?(berth-load|berth|make)((?:\s+(?:"[^"]*"|'[^']*'|[^|;&)#"'])*)?)`)

// words splits a command's arguments as the shell would, roughly: a
// quoted word is one argument, and is marked with a leading quote so it
// is never taken for a flag or a subcommand.
func words(s string) []string {
	var (
		out   []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			if !in {
				cur.WriteRune('\'')
			}
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

func TestDocumentedCommands(t *testing.T) {
	root := newRootCmd(&env{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	loadHelp := berthLoadFlags(t)
	checked := 0
	for _, b := range docBlocks(t) {
		where := b.file + ":" + strconv.Itoa(b.line)
		switch b.lang {
		case "json":
			if !json.Valid([]byte(b.text)) {
				t.Errorf("%s: the JSON block is not JSON", where)
			}
			continue
		case "sh":
		default:
			continue
		}
		if out, err := exec.Command("bash", "-n", "-c", b.text).CombinedOutput(); err != nil {
			t.Errorf("%s: the shell block does not parse: %s", where, out)
		}
		for _, line := range commandLines(b.text) {
			for _, m := range invocation.FindAllStringSubmatch(line, -1) {
				args := words(m[2])
				checked++
				switch m[1] {
				case "make":
					for _, a := range args {
						if strings.Contains(a, "=") || strings.HasPrefix(a, "-") {
							continue
						}
						if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(a) + `:`).Match(makefile) {
							t.Errorf("%s: make %s: the Makefile has no such target", where, a)
						}
					}
				case "berth-load":
					for _, a := range args {
						if strings.HasPrefix(a, "-") {
							name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
							if !slices.Contains(loadHelp, name) {
								t.Errorf("%s: berth-load has no flag --%s", where, name)
							}
						}
					}
				case "berth":
					var path []string
					for _, a := range args {
						if strings.HasPrefix(a, "-") || strings.HasPrefix(a, "$") || strings.HasPrefix(a, "'") || strings.HasPrefix(a, "<") {
							break
						}
						path = append(path, a)
					}
					cmd, rest, err := root.Find(path)
					if err != nil || cmd == root && len(path) > 0 {
						t.Errorf("%s: berth %s: no such command", where, strings.Join(path, " "))
						continue
					}
					// Arguments are checked only when the shell would pass
					// them as written (no quotes, variables or placeholders).
					plain := true
					for _, a := range args {
						plain = plain && !strings.ContainsAny(a[:1], "'$<")
					}
					if plain && len(rest) > 0 && !cmd.HasSubCommands() && cmd.Args != nil && cmd.Args(cmd, rest) != nil {
						t.Errorf("%s: berth %s does not take the arguments %v", where, cmd.Name(), rest)
					}
					for _, a := range args {
						if a == "--" {
							break // the rest is the command's, not berth's
						}
						if !strings.HasPrefix(a, "--") {
							continue
						}
						name := strings.TrimPrefix(strings.SplitN(a, "=", 2)[0], "--")
						if cmd.Flag(name) == nil {
							t.Errorf("%s: berth %s has no flag --%s", where, cmd.CommandPath(), name)
						}
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d commands found in the docs: the parser is broken", checked)
	}
}

// berthLoadFlags are the flags `berth-load -h` lists.
func berthLoadFlags(t *testing.T) []string {
	t.Helper()
	out, _ := exec.Command("go", "run", "../berth-load", "-h").CombinedOutput()
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z][a-z0-9-]*)`).FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	if len(flags) < 3 {
		t.Fatalf("berth-load -h lists no flags:\n%s", out)
	}
	return flags
}

// TestDocumentedSessions runs the blocks marked to run, as a new user
// would after `make run`, against a real `berth serve`.
func TestDocumentedSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts berth serve with its embedded database")
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("the README's example uses jq: install it (apt-get install jq)")
	}
	var blocks []docBlock
	for _, b := range docBlocks(t) {
		if b.run {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) < 2 {
		t.Fatalf("found %d runnable blocks, want the README's and the quickstart's", len(blocks))
	}
	work := embeddedDataDir(t)
	bin := filepath.Dir(buildBerth(t))
	if err := os.Symlink(bin, filepath.Join(work, "bin")); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(work, ".berth")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, filepath.Join(bin, "berth"), data)
	home := t.TempDir()
	for _, b := range blocks {
		where := b.file + ":" + strconv.Itoa(b.line)
		script := "set -euo pipefail\n" + strings.ReplaceAll(b.text, "http://127.0.0.1:8080", p.url)
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "USER=docsuser", "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
		done := make(chan struct{})
		var (
			out []byte
			err error
		)
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Minute):
			cmd.Process.Kill()
			<-done
			t.Errorf("%s: the block did not finish in 3 minutes", where)
		}
		got := strings.ReplaceAll(string(out), p.url, "http://127.0.0.1:8080")
		if err != nil {
			t.Errorf("%s: the block failed: %v\n%s\nberth's log:\n%s", where, err, out, p.log.String())
			continue
		}
		if b.expect != "" && !strings.Contains(got, b.expect) {
			t.Errorf("%s: the block's output lacks %q:\n%s", where, b.expect, got)
		}
	}
}
