package egress

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestPolicyValidate(t *testing.T) {
	many := make([]string, MaxAllow+1)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.example", i)
	}
	for _, tc := range []struct {
		p       Policy
		wantErr string // "" = valid; else a substring of the error
	}{
		{Policy{Egress: None}, ""},
		{Policy{Egress: Public}, ""},
		{Policy{Egress: Allowlist, Allow: []string{"pypi.org", "*.github.com", "203.0.113.7", "203.0.113.0/24",
			"2001:db8::/32", "pypi.org:443", "[2001:db8::1]:443", "2001:db8::1", "203.0.113.0/24:8080",
			"[2001:db8::/48]:22", "files.pythonhosted.org.", "PyPI.Org", "under_score.example", "xn--bcher-kva.example"}}, ""},
		{Policy{Egress: Allowlist, Allow: many[:MaxAllow]}, ""},
		{Policy{}, `egress ""`},
		{Policy{Egress: "everything"}, `egress "everything"`},
		{Policy{Egress: None, Allow: []string{"pypi.org"}}, "only for egress"},
		{Policy{Egress: Allowlist}, "at least one"},
		{Policy{Egress: Allowlist, Allow: many}, "at most 64"},
		{Policy{Egress: Allowlist, Allow: []string{"pypi.org", ""}}, `allow entry ""`},
		{Policy{Egress: Allowlist, Allow: []string{"bücher.example"}}, "non-ASCII"},
		{Policy{Egress: Allowlist, Allow: []string{"a.*.example"}}, "first label"},
		{Policy{Egress: Allowlist, Allow: []string{"*"}}, "first label"},
		{Policy{Egress: Allowlist, Allow: []string{"*.*.example"}}, "first label"},
		{Policy{Egress: Allowlist, Allow: []string{"*."}}, "empty name"},
		{Policy{Egress: Allowlist, Allow: []string{"pypi.org:0"}}, "1 to 65535"},
		{Policy{Egress: Allowlist, Allow: []string{"pypi.org:65536"}}, "1 to 65535"},
		{Policy{Egress: Allowlist, Allow: []string{"pypi.org:https"}}, "1 to 65535"},
		{Policy{Egress: Allowlist, Allow: []string{"pypi.org:"}}, "empty port"},
		{Policy{Egress: Allowlist, Allow: []string{"[pypi.org]:443"}}, "only for IPv6"},
		{Policy{Egress: Allowlist, Allow: []string{"[2001:db8::1"}}, "missing ]"},
		{Policy{Egress: Allowlist, Allow: []string{"203.0.113.0/33"}}, "CIDR"},
		{Policy{Egress: Allowlist, Allow: []string{"a..b"}}, "empty label"},
		{Policy{Egress: Allowlist, Allow: []string{"-a.example"}}, "hyphen"},
		{Policy{Egress: Allowlist, Allow: []string{"a b.example"}}, "not allowed"},
		{Policy{Egress: Allowlist, Allow: []string{strings.Repeat("a", 64) + ".example"}}, "63"},
		{Policy{Egress: Allowlist, Allow: []string{strings.Repeat("a.", 130) + "example"}}, "longer"},
		{Policy{Egress: Allowlist, Allow: []string{"fe80::1%eth0"}}, "zone"},
	} {
		err := tc.p.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.p.Allow, err)
		case tc.wantErr != "" && err == nil:
			t.Errorf("%s %v: valid, want an error containing %q", tc.p.Egress, tc.p.Allow, tc.wantErr)
		case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
			t.Errorf("%s %v: error %q, want it to contain %q", tc.p.Egress, tc.p.Allow, err, tc.wantErr)
		}
	}
	// The error names the bad entry, so a member can find it in a long list.
	err := Policy{Egress: Allowlist, Allow: []string{"pypi.org", "bad..entry"}}.Validate()
	if err == nil || !strings.Contains(err.Error(), `"bad..entry"`) {
		t.Errorf("error %v does not name the bad entry", err)
	}
}

func TestPolicyNormalizeAndString(t *testing.T) {
	p := Policy{Egress: Allowlist, Allow: []string{"PyPI.org.", "*.GitHub.com:443", "203.0.113.9/24", "[2001:DB8::1]:443", "::ffff:203.0.113.7"}}
	n, err := p.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	want := "allowlist: pypi.org, *.github.com:443, 203.0.113.0/24, [2001:db8::1]:443, 203.0.113.7"
	if n.String() != want {
		t.Errorf("normalized %q, want %q", n.String(), want)
	}
	if got := (Policy{Egress: None}).String(); got != "none" {
		t.Errorf("none policy reads %q", got)
	}
	var j Policy
	if err := json.Unmarshal([]byte(`{"egress":"allowlist","allow":["pypi.org","*.github.com:443"]}`), &j); err != nil {
		t.Fatal(err)
	}
	if j.String() != "allowlist: pypi.org, *.github.com:443" || j.Validate() != nil {
		t.Errorf("JSON policy reads %q (%v)", j, j.Validate())
	}
}

func TestEntryMatch(t *testing.T) {
	mustEntry := func(s string) entry {
		e, err := parseEntry(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return e
	}
	for _, tc := range []struct {
		entry, name string
		port        uint16
		want        bool
	}{
		{"pypi.org", "pypi.org", 443, true},
		{"pypi.org", "files.pypi.org", 443, false},
		{"pypi.org", "evilpypi.org", 443, false},
		{"pypi.org:443", "pypi.org", 80, false},
		{"pypi.org:443", "pypi.org", 443, true},
		{"pypi.org:443", "pypi.org", 0, true}, // a DNS question has no port
		{"*.github.com", "api.github.com", 443, true},
		{"*.github.com", "a.b.github.com", 22, true},
		{"*.github.com", "github.com", 443, false},
		{"*.github.com", "evilgithub.com", 443, false},
		{"203.0.113.0/24", "203.0.113.7", 443, false}, // an address entry never matches a name
	} {
		if got := mustEntry(tc.entry).matchName(tc.name, tc.port); got != tc.want {
			t.Errorf("%s matches %s:%d = %v, want %v", tc.entry, tc.name, tc.port, got, tc.want)
		}
	}
}
