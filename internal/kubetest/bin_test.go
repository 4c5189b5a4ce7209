package kubetest

import (
	"errors"
	"strings"
	"testing"
)

// Without the binaries the harness fails and says how to get them.
func TestMissingBinariesSayMakeKubeenv(t *testing.T) {
	t.Setenv(BinEnv, "")
	for _, dir := range []string{"", t.TempDir()} {
		_, err := findBinaries(dir)
		if !errors.Is(err, ErrNoBinaries) || !strings.Contains(err.Error(), "make kubeenv") {
			t.Errorf("findBinaries(%q) = %v, want ErrNoBinaries saying to run make kubeenv", dir, err)
		}
	}
}
