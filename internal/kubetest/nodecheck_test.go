package kubetest

import (
	"strings"
	"testing"
)

// TestChooseNode: the stand-in is chosen only where a real node cannot
// start (here: a folder without a kubelet) or when asked for, always with
// a note saying so; a real node that is required but cannot start is an
// error, never a quiet stand-in.
func TestChooseNode(t *testing.T) {
	noKubelet := t.TempDir()
	for _, c := range []struct {
		name, envv string
		kind       NodeKind
		want       NodeKind
		note, err  string
	}{
		{"stand-in asked", "", NodeStandIn, NodeStandIn, "stand-in", ""},
		{"auto without a kubelet", "", NodeAuto, NodeStandIn, "no kubelet in", ""},
		{"auto, stand-in by the environment", "stand-in", NodeAuto, NodeStandIn, "BERTH_KUBE_NODE=stand-in", ""},
		{"real without a kubelet", "", NodeReal, "", "", "no kubelet in"},
		{"auto, real required by the environment", "real", NodeAuto, "", "", "no real node can start"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(NodeEnv, c.envv)
			got, note, err := ChooseNode(c.kind, noKubelet)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ChooseNode = %q, %q, %v; want an error naming %q", got, note, err, c.err)
				}
				return
			}
			if err != nil || got != c.want || !strings.Contains(note, c.note) {
				t.Fatalf("ChooseNode = %q, %q, %v; want %q with a note naming %q", got, note, err, c.want, c.note)
			}
		})
	}
}
