#!/usr/bin/env bash
# Builds the real Kubernetes control plane that internal/kubetest starts:
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler, and
# kubectl, and the kubelet of the real node it runs beside them (see
# internal/kubetest/realnode.go), from the Go module proxy at the versions this module's go.mod
# pins, into a cache folder outside the repository. A binary already there
# is kept, so only the first run is slow.
#
#   build.sh        build what is missing, then print the folder
#   build.sh dir    print the folder only (the Makefile exports it as
#                   BERTH_KUBE_BIN)
#
# The folder is ${BERTH_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/kubeenv}/v1.37.2-<hash>,
# the hash that of go.mod and go.sum: checkouts pinning other versions (other
# branches, other worktrees) each get a folder of their own and never replace
# each other's binaries. `rm -rf ~/.cache/berth/kubeenv` frees the space.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kube_version=v1.37.2
cache=${BERTH_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/berth/kubeenv}
stamp=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)
dir=$cache/$kube_version-$stamp

if [[ "${1:-}" == dir ]]; then
	echo "$dir"
	exit 0
fi

go=${GO:-go}
mkdir -p "$dir"

# Two `make test` runs at once must not build the same binary twice (a
# kube-apiserver build takes minutes on two cores): the second waits.
exec 9>"$dir/.lock"
flock 9

# The version the binaries report (/version, and the compatibility version
# the components compare with each other), as Kubernetes' own build sets it.
ldflags=""
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	ldflags+=" -X '$pkg.gitVersion=$kube_version'"
	ldflags+=" -X '$pkg.gitMajor=1' -X '$pkg.gitMinor=37'"
	ldflags+=" -X '$pkg.gitTreeState=clean'"
done

told=""
began=$SECONDS
build() { # name package
	local name=$1 pkg=$2
	if [[ -x "$dir/$name" ]]; then
		return 0
	fi
	if [[ -z "$told" ]]; then
		echo "kubeenv: building the Kubernetes control plane for the tests into $dir" >&2
		echo "kubeenv: the first build takes about 25 minutes on 2 cores (kube-apiserver alone about 10, kubelet about 8); later ones are seconds, from the Go build cache" >&2
		told=1
	fi
	echo "kubeenv: building $name ($pkg)" >&2
	local start=$SECONDS
	# Build beside the target, then rename: an interrupted build leaves no
	# binary that looks complete.
	CGO_ENABLED=0 "$go" -C "$here" build -trimpath -ldflags "-s -w $ldflags" -o "$dir/$name.tmp" "$pkg"
	mv "$dir/$name.tmp" "$dir/$name"
	echo "kubeenv: built $name in $((SECONDS - start))s" >&2
}

# One at a time: each build already uses every core.
build etcd go.etcd.io/etcd/server/v3
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kubectl k8s.io/kubernetes/cmd/kubectl
build kubelet k8s.io/kubernetes/cmd/kubelet
if [[ -n "$told" ]]; then
	echo "kubeenv: built in $((SECONDS - began))s" >&2
fi
echo "$dir"
