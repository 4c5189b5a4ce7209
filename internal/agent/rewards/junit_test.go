package rewards

import (
	"errors"
	"strings"
	"testing"
)

func TestParseJUnit(t *testing.T) {
	cases := []struct {
		name, xml string
		want      counts
	}{
		{"empty suite", `<testsuite/>`, counts{}},
		{"error wins over failure", `<testsuite><testcase><failure/><error/></testcase></testsuite>`, counts{total: 1, errors: 1}},
		{"failure wins over skipped", `<testsuite><testcase><skipped/><failure/></testcase></testsuite>`, counts{total: 1, failed: 1}},
		{"only direct children mark a case", `<testsuite><testcase><system-out><failure/></system-out></testcase></testsuite>`, counts{total: 1, passed: 1}},
		{"attributes only", `<testsuites><testsuite tests="10" failures="2" errors="1" skipped="3"/></testsuites>`, counts{total: 10, passed: 4, failed: 2, errors: 1, skipped: 3}},
		{"attributes ignored when cases exist", `<testsuite tests="99" failures="9"><testcase/></testsuite>`, counts{total: 1, passed: 1}},
		{"inconsistent attributes", `<testsuite tests="1" failures="3"/>`, counts{total: 3, failed: 3}},
		{"legacy encoding", `<?xml version="1.0" encoding="ISO-8859-1"?><testsuite><testcase/></testsuite>`, counts{total: 1, passed: 1}},
	}
	for _, tc := range cases {
		got, err := parseJUnit(strings.NewReader(tc.xml))
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "   ", "<project/>", "not xml"} {
		if _, err := parseJUnit(strings.NewReader(bad)); !errors.Is(err, errNotJUnit) {
			t.Errorf("%q: err = %v, want errNotJUnit", bad, err)
		}
	}
	for _, bad := range []string{"<testsuite><testcase>", "<testsuite></testcase>", "<testsuite>&bogus;</testsuite>"} {
		if _, err := parseJUnit(strings.NewReader(bad)); err == nil || errors.Is(err, errNotJUnit) {
			t.Errorf("%q: err = %v, want a syntax error", bad, err)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		glob, path string
		want       bool
	}{
		{"*.xml", "a.xml", true},
		{"*.xml", "d/a.xml", false},
		{"**/*.xml", "a.xml", true},
		{"**/*.xml", "d/e/a.xml", true},
		{"d/**/a.xml", "d/a.xml", true},
		{"d/**/a.xml", "d/x/y/a.xml", true},
		{"d/**/a.xml", "e/x/a.xml", false},
		{"d/**", "d/x/y", true},
		{"**/**/b/*.xml", "a/b/c.xml", true},
		{"target/surefire-reports/TEST-*.xml", "target/surefire-reports/TEST-Foo.xml", true},
	}
	for _, tc := range cases {
		p, err := compile("/ws", tc.glob)
		if err != nil {
			t.Fatalf("%s: %v", tc.glob, err)
		}
		if got := p.match(tc.path); got != tc.want {
			t.Errorf("%s ~ %s = %v, want %v", tc.glob, tc.path, got, tc.want)
		}
	}
	p, _ := compile("/ws", "target/*/reports/*.xml")
	if p.root() != "target" || !p.canContain("target/x") || !p.canContain("target/x/reports") || p.canContain("target/x/other") || p.canContain("src") {
		t.Errorf("pruning of %q is wrong", p.text)
	}
}
