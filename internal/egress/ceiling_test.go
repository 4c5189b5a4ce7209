package egress

import (
	"strings"
	"testing"
)

func TestCeilingPermits(t *testing.T) {
	list := func(entries ...string) Policy { return Policy{Egress: Allowlist, Allow: entries} }
	ceil := Ceiling{Egress: Allowlist, Allow: []string{"pypi.org", "*.github.com", "files.example:443", "203.0.113.0/24", "2001:db8::/32", "[2001:db9::1]:22"}}
	for _, tc := range []struct {
		c       Ceiling
		p       Policy
		wantErr string
	}{
		{Ceiling{Egress: Public}, Policy{Egress: Public}, ""},
		{Ceiling{Egress: Public}, list("anything.example"), ""},
		{Ceiling{Egress: Public}, Policy{Egress: None}, ""},
		{Ceiling{Egress: None}, Policy{Egress: None}, ""},
		{Ceiling{Egress: None}, list("pypi.org"), `egress "allowlist" is not within the operator's ceiling (none)`},
		{Ceiling{Egress: None}, Policy{Egress: Public}, `egress "public"`},
		{Ceiling{}, list("pypi.org"), "ceiling (none)"},
		{ceil, Policy{Egress: None}, ""},
		{ceil, Policy{Egress: Public}, `egress "public" is not within`},
		{ceil, list("pypi.org"), ""},
		{ceil, list("pypi.org:443"), ""},
		{ceil, list("PyPI.org."), ""},
		{ceil, list("api.github.com", "*.github.com", "*.api.github.com:443"), ""},
		{ceil, list("github.com"), `"github.com" is not within`},
		{ceil, list("files.example:443"), ""},
		{ceil, list("files.example"), `"files.example" is not within`},
		{ceil, list("files.example:80"), `"files.example:80"`},
		{ceil, list("*.pypi.org"), `"*.pypi.org"`},
		{ceil, list("203.0.113.7", "203.0.113.128/25:443", "2001:db8:1::/48", "[2001:db9::1]:22"), ""},
		{ceil, list("203.0.112.0/23"), `"203.0.112.0/23"`},
		{ceil, list("2001:db9::1"), `"2001:db9::1"`},
		{ceil, list("pypi.org", "evil.com"), `network: "evil.com" is not within the operator's ceiling (allowlist: pypi.org, *.github.com`},
		{ceil, list("bad..name"), "bad..name"},
	} {
		err := tc.c.Permits(tc.p)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("ceiling %s, policy %s: %v", tc.c, tc.p, err)
		case tc.wantErr != "" && err == nil:
			t.Errorf("ceiling %s permits %s, want %q", tc.c, tc.p, tc.wantErr)
		case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
			t.Errorf("ceiling %s, policy %s: error %q, want it to contain %q", tc.c, tc.p, err, tc.wantErr)
		}
	}
}
