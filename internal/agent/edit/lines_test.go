package edit

import (
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/wire"
)

func TestEditLines(t *testing.T) {
	tests := []struct {
		name       string
		content    string
		start, end int
		new        string
		want       string
	}{
		{"replace one line", "a\nb\nc\n", 2, 2, "B", "a\nB\nc\n"},
		{"replace with trailing newline adds no empty line", "a\nb\nc\n", 2, 2, "B\n", "a\nB\nc\n"},
		{"replace range with more lines", "a\nb\nc\nd\n", 2, 3, "x\ny\nz\n", "a\nx\ny\nz\nd\n"},
		{"replace whole file", "a\nb\n", 1, 2, "z", "z\n"},
		{"insert before first", "a\nb\n", 1, 0, "top\n", "top\na\nb\n"},
		{"insert in middle", "a\nb\n", 2, 1, "mid", "a\nmid\nb\n"},
		{"append", "a\nb\n", 3, 2, "c\nd", "a\nb\nc\nd\n"},
		{"append blank line", "a\n", 2, 1, "\n", "a\n\n"},
		{"delete middle", "a\nb\nc\n", 2, 2, "", "a\nc\n"},
		{"delete all", "a\nb\n", 1, 2, "", ""},
		{"insert nothing", "a\n", 2, 1, "", "a\n"},
		{"empty file insert", "", 1, 0, "x", "x\n"},
		{"crlf replace", "a\r\nb\r\nc\r\n", 2, 2, "x\ny", "a\r\nx\r\ny\r\nc\r\n"},
		{"crlf new content keeps crlf", "a\r\nb\r\n", 2, 2, "x\r\ny\r\n", "a\r\nx\r\ny\r\n"},
		{"lf file gets lf from crlf content", "a\nb\n", 1, 1, "x\r\ny\r\n", "x\ny\nb\n"},
		{"crlf append", "a\r\n", 2, 1, "b", "a\r\nb\r\n"},
		{"no trailing newline replace last", "a\nb", 2, 2, "x\ny\n", "a\nx\ny"},
		{"no trailing newline replace middle", "a\nb\nc", 2, 2, "x", "a\nx\nc"},
		{"no trailing newline append", "a\nb", 3, 2, "c", "a\nb\nc"},
		{"no trailing newline delete last", "a\nb", 2, 2, "", "a"},
		{"no trailing newline crlf delete last", "a\r\nb", 2, 2, "", "a"},
		{"no trailing newline crlf append", "a\r\nb", 3, 2, "c", "a\r\nb\r\nc"},
		{"no trailing newline keeps an empty last line", "\n0", 2, 2, "", "\n"},
		{"no trailing newline append empty line", "a", 2, 1, "\n", "a\n\n"},
		{"mixed endings keep other lines", "a\r\nb\nc\r\n", 3, 3, "z", "a\r\nb\nz\r\n"},
		{"empty lines count", "\n\n\n", 2, 2, "x", "\nx\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EditLines([]byte(tt.content), tt.start, tt.end, tt.new)
			if err != nil {
				t.Fatalf("EditLines: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEditLinesBadRange(t *testing.T) {
	tests := []struct {
		name       string
		content    string
		start, end int
		wantParts  []string
	}{
		{"start zero", "a\nb\n", 0, 0, []string{"start_line 0", "file has 2 lines", "between 1 and 3"}},
		{"start past append", "a\nb\n", 4, 4, []string{"start_line 4", "file has 2 lines", "between 1 and 3"}},
		{"end before insert", "a\nb\n", 2, 0, []string{"end_line 0", "between 1", "and 2", "file has 2 lines"}},
		{"end past last", "a\nb\n", 1, 3, []string{"end_line 3", "and 2", "file has 2 lines"}},
		{"no final newline counts last line", "a\nb", 1, 3, []string{"file has 2 lines"}},
		{"empty file", "", 1, 1, []string{"end_line 1", "file has 0 lines"}},
		{"negative", "a\n", -5, -7, []string{"start_line -5"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := EditLines([]byte(tt.content), tt.start, tt.end, "x")
			if err == nil {
				t.Fatalf("EditLines succeeded with %q, want error", got)
			}
			d := wire.DetailOf(err)
			if d.Code != wire.CodeBadRequest {
				t.Errorf("code = %s, want %s", d.Code, wire.CodeBadRequest)
			}
			for _, p := range tt.wantParts {
				if !strings.Contains(d.Message, p) {
					t.Errorf("message %q lacks %q", d.Message, p)
				}
			}
		})
	}
}

func TestCountLines(t *testing.T) {
	for in, want := range map[string]int{"": 0, "a": 1, "a\n": 1, "a\nb": 2, "\n": 1, "\n\n": 2, "a\r\nb\r\n": 2} {
		if got := countLines([]byte(in)); got != want {
			t.Errorf("countLines(%q) = %d, want %d", in, got, want)
		}
	}
}
