package kubetest

import "testing"

func TestRewrite(t *testing.T) {
	r := newRewriter(
		[]pathPair{{"/agent", "/h/vol/agent"}, {"/workspace/", "/h/vol/ws"}, {"/tmp", "/tmp/kt/tmp"}},
		[]pathPair{{"/berth-agent", "/h/bin/berth-agent"}, {"/agent", "/h/image-agent"}},
	)
	for in, want := range map[string]string{
		"/agent":                             "/h/vol/agent",
		"/agent/berth-agent":                 "/h/vol/agent/berth-agent",
		"cp /berth-agent /agent/berth-agent": "cp /h/bin/berth-agent /h/vol/agent/berth-agent",
		"--workspace=/workspace":             "--workspace=/h/vol/ws",
		"--context=dir:///workspace":         "--context=dir:///h/vol/ws",
		"/data/agent /agents /agent.d":       "/data/agent /agents /agent.d",
		"PATH=/agent:/usr/bin":               "PATH=/h/vol/agent:/usr/bin",
		"/tmp/x":                             "/tmp/kt/tmp/x", // the host path is not rewritten again
		"relative/agent":                     "relative/agent",
		"'/workspace' \"/agent\"":            "'/h/vol/ws' \"/h/vol/agent\"",
	} {
		if got := r.rewrite(in); got != want {
			t.Errorf("rewrite(%q) = %q, want %q", in, got, want)
		}
	}
}
