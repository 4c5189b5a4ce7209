package oidclogin

import (
	"strings"
	"testing"
)

func TestUsername(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := []struct {
		in   []string
		want string
	}{
		{[]string{"Jane.Doe", "jane@example.com", "sub"}, "jane.doe"},
		{[]string{"", "Jane@Example.com", "sub"}, "jane@example.com"},
		{[]string{"", "", "AbC-123"}, "abc-123"},
		// A name that does not fit gives way to one that does.
		{[]string{"Jane Doe", "jane@example.com", "s"}, "jane@example.com"},
		{[]string{"Jöhn Doe", "", "0a1b2c"}, "0a1b2c"},
		// Nothing fits: the first is made to fit.
		{[]string{"Jöhn Doe", "", ""}, "j_hn_doe"},
		{[]string{long, "", ""}, long[:64]},
		{[]string{"", "", ""}, ""},
	}
	for _, tc := range cases {
		if got := Username(tc.in...); got != tc.want {
			t.Errorf("Username(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := Username(tc.in...); got != "" && !validUsername(got) {
			t.Errorf("Username(%q) = %q does not fit", tc.in, got)
		}
	}
}

func TestGroupsClaim(t *testing.T) {
	claims := map[string]any{"a": []any{"x", " y ", "x", ""}, "b": "solo", "c": 3.0, "d": []any{"x", 1.0}}
	if g, err := groupsClaim(claims, "a"); err != nil || strings.Join(g, ",") != "x,y" {
		t.Errorf("array: %v %v", g, err)
	}
	if g, err := groupsClaim(claims, "b"); err != nil || strings.Join(g, ",") != "solo" {
		t.Errorf("string: %v %v", g, err)
	}
	if g, err := groupsClaim(claims, "missing"); err != nil || g != nil {
		t.Errorf("missing: %v %v", g, err)
	}
	if _, err := groupsClaim(claims, "c"); err == nil || !strings.Contains(err.Error(), "float64") {
		t.Errorf("number: %v", err)
	}
	if _, err := groupsClaim(claims, "d"); err == nil || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("mixed: %v", err)
	}
}
