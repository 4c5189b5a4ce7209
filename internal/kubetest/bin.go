package kubetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// BinEnv is the environment variable naming the folder that holds etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kubectl. The
// Makefile exports it; `make kubeenv` fills the folder.
const BinEnv = "BERTH_KUBE_BIN"

// ErrNoBinaries is returned (wrapped) when BinEnv is unset or a binary is
// missing from its folder.
var ErrNoBinaries = errors.New("kubetest: control plane binaries missing")

// binaries are the programs Start runs, by the names build.sh gives them.
type binaries struct {
	etcd, apiserver, controllerManager, scheduler string
	kubectl                                       string // "" when missing: only tests that apply manifests need it
	kubelet                                       string // "" when missing: only a real node needs it
}

// findBinaries resolves the programs in dir (BinEnv when dir is empty).
func findBinaries(dir string) (binaries, error) {
	if dir == "" {
		dir = os.Getenv(BinEnv)
	}
	if dir == "" {
		return binaries{}, fmt.Errorf("%w: %s is not set; run `make kubeenv` (or `make test`, which exports it)", ErrNoBinaries, BinEnv)
	}
	b := binaries{
		etcd:              filepath.Join(dir, "etcd"),
		apiserver:         filepath.Join(dir, "kube-apiserver"),
		controllerManager: filepath.Join(dir, "kube-controller-manager"),
		scheduler:         filepath.Join(dir, "kube-scheduler"),
	}
	for _, p := range []string{b.etcd, b.apiserver, b.controllerManager, b.scheduler} {
		if !isExecutable(p) {
			return binaries{}, fmt.Errorf("%w: %s is not an executable file; run `make kubeenv` to build it", ErrNoBinaries, p)
		}
	}
	if p := filepath.Join(dir, "kubectl"); isExecutable(p) {
		b.kubectl = p
	}
	if p := filepath.Join(dir, "kubelet"); isExecutable(p) {
		b.kubelet = p
	}
	return b, nil
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
