package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The images berth's tests run on a real node, made from what this
// machine has: berth's own static binaries, the host's Debian packages,
// Debian's static bash and busybox. None comes from a registry.

// passwd and group are the accounts of the test images: root, nobody,
// and nonroot, the uid berth runs sandboxes as (65532, distroless's
// name for it), so that `id -un` and `~` mean something inside.
const (
	passwd = "root:x:0:0:root:/root:/bin/bash\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/workspace:/bin/bash\n"
	group = "root:x:0:\nnogroup:x:65534:\nnonroot:x:65532:\n"
)

// accounts is a layer of /etc/passwd and /etc/group with more lines,
// and the folders every Linux root has.
func accounts(morePasswd, moreGroup string) *Layer {
	l := NewLayer()
	l.Content("/etc/passwd", []byte(passwd+morePasswd), 0o644)
	l.Content("/etc/group", []byte(group+moreGroup), 0o644)
	l.Content("/etc/nsswitch.conf", []byte("passwd: files\ngroup: files\nhosts: files dns\n"), 0o644)
	l.Dir("/tmp", 0o1777)
	l.Dir("/root", 0o700)
	l.Dir("/home", 0o755)
	return l
}

// PauseImage is the node's sandbox image: kubetest's pause program
// alone, built static.
func PauseImage(ctx context.Context, ref string) (NodeImage, error) {
	bin, err := buildStatic(ctx, "github.com/berth-mcp/berth/internal/kubetest/pause")
	if err != nil {
		return NodeImage{}, err
	}
	l := NewLayer()
	l.Content("/pause", bin, 0o755)
	return NodeImage{Ref: ref, Layers: []*Layer{l}, Entrypoint: []string{"/pause"}, User: "65535:65535"}, nil
}

// AgentImage is what deploy/Containerfile.berth-agent builds: the static
// berth-agent at /berth-agent and nothing else, as --agent-image wants.
// agentBin must be static (CGO_ENABLED=0): it runs in images without a C
// library. The binary is read now: it may go once AgentImage returns.
func AgentImage(ref, agentBin string) (NodeImage, error) {
	b, err := os.ReadFile(agentBin)
	if err != nil {
		return NodeImage{}, fmt.Errorf("image %s: %w", ref, err)
	}
	l := NewLayer()
	l.Content("/berth-agent", b, 0o755)
	return NodeImage{Ref: ref, Layers: []*Layer{l}, Entrypoint: []string{"/berth-agent"}, User: "65532:65532"}, nil
}

// DebianImage is a Debian 12 image of the host's own packages
// (DebianPackages: bash, coreutils, procps, util-linux, python3, ...).
// user is its USER ("" for root); a non-root user other than nonroot is
// added to its accounts as "builder".
func DebianImage(ctx context.Context, ref, user string) (NodeImage, error) {
	return DebianImageWith(ctx, ref, user)
}

// DebianImageWith is DebianImage with more of the host's packages
// (curl, git, ...) and what they depend on.
func DebianImageWith(ctx context.Context, ref, user string, more ...string) (NodeImage, error) {
	debian, err := DebianLayer(ctx, append(slices.Clone(DebianPackages), more...)...)
	if err != nil {
		return NodeImage{}, fmt.Errorf("image %s: %w", ref, err)
	}
	var morePasswd, moreGroup string
	if uid, _, _ := strings.Cut(user, ":"); uid != "" && uid != "0" && uid != "65532" {
		morePasswd = fmt.Sprintf("builder:x:%s:%s:builder:/home/builder:/bin/bash\n", uid, uid)
		moreGroup = fmt.Sprintf("builder:x:%s:\n", uid)
	}
	return NodeImage{Ref: ref, Layers: []*Layer{debian, accounts(morePasswd, moreGroup)}, User: user, Cmd: []string{"/bin/bash"}}, nil
}

// StaticImage is an image without a C library, like Alpine's or
// distroless's static images, where only static programs run: Debian's
// bash-static as /bin/bash and busybox-static for the usual commands
// (Debian's packages of them; the Makefile's node target installs them).
func StaticImage(ref string) (NodeImage, error) {
	l := accounts("", "")
	if err := l.HostFile("/bin/bash", "/bin/bash-static"); err != nil {
		return NodeImage{}, fmt.Errorf("image %s: %w (apt-get install bash-static)", ref, err)
	}
	if err := l.HostFile("/bin/busybox", "/bin/busybox"); err != nil {
		return NodeImage{}, fmt.Errorf("image %s: %w (apt-get install busybox-static)", ref, err)
	}
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		return NodeImage{}, fmt.Errorf("image %s: busybox --list: %w", ref, err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "bash" && applet != "busybox" {
			l.Symlink("/bin/"+applet, "busybox")
		}
	}
	l.Symlink("/usr/bin", "../bin")
	return NodeImage{Ref: ref, Layers: []*Layer{l}, Cmd: []string{"/bin/bash"}, Env: []string{"PATH=/bin"}}, nil
}

// buildStatic builds a main package of this module with CGO off and
// returns the binary.
func buildStatic(ctx context.Context, pkg string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "kubetest-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build %s: %v\n%s", pkg, err, out)
	}
	return os.ReadFile(bin)
}
