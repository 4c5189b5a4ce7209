//go:build linux

package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/egresstest"
	"github.com/berth-mcp/berth/internal/kubetest"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/rbac"
	"github.com/berth-mcp/berth/internal/runtime/kube"
	"github.com/berth-mcp/berth/internal/wire"
)

// netImage is the Debian test image with curl, imported by the egress
// test alone.
const netImage = "registry.test/net:1"

// egressTestBytes is each sandbox's byte limit in the egress tests: far
// above what they move but in the limit's own test.
const egressTestBytes = 8 << 20

// The test internet's ranges, which the operator makes reachable here as
// one would an internal mirror: berth refuses documentation ranges
// otherwise.
var testInternet = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("2001:db8:203::/48")}

// kubeEgress is an orchestrator on the Kubernetes runtime whose sandbox
// pods, on the real node, reach the test internet through berth's
// egress gateway and nothing else.
type kubeEgress struct {
	svc   *orchestrator.Service
	ns    string
	p     rbac.Principal
	inet  *egresstest.Internet
	node  netip.Addr     // the node's address, on its pod bridge
	proxy netip.AddrPort // the egress proxy, on the node's address
	caEnv map[string]string
}

// newKubeEgress starts it all. berth's egress listeners are on the
// node's bridge address (the proxy on a free port, DNS on 53), which
// pods reach. The node's CNI bridge enforces no NetworkPolicy: what
// enforces it here are nftables rules the test node applies itself
// (kubetest's RestrictPods), standing in for a network plugin enforcing
// the NetworkPolicy deploy/ ships. They REJECT, not drop, everything
// else a pod sends, so that a tool ignoring the proxy fails at once.
func newKubeEgress(t *testing.T) *kubeEgress {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane")
	}
	if !onRealNode() {
		t.Skipf("egress needs sandbox pods in real containers on a node with its own network; they run on %s", nodeNote)
	}
	inet := egresstest.Start(t)
	ctx := context.Background()
	img, err := kubetest.DebianImageWith(ctx, netImage, "", "curl")
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Node.Import(ctx, img); err != nil {
		t.Fatal(err)
	}
	nodeIP, ok := netip.AddrFromSlice(node.Node.IP.To4())
	if !ok {
		t.Fatalf("node address %s", node.Node.IP)
	}
	// Small pods: the node's two CPUs hold three sandboxes at once.
	rt, ns := newNodeRuntime(t, kube.Options{CPU: "200m", Memory: "256Mi", Egress: kube.EgressOptions{
		Listen: net.JoinHostPort(nodeIP.String(), "0"), DNSListen: net.JoinHostPort(nodeIP.String(), "53"),
		Guard: &egress.Guard{Reachable: testInternet}, Resolver: inet.Resolver(),
		Limits: egress.Limits{Bytes: egressTestBytes},
	}})
	proxy, ok := rt.EgressProxy()
	if !ok || proxy.Addr() != nodeIP {
		t.Fatalf("egress proxy %s %v, want one on %s", proxy, ok, nodeIP)
	}
	node.Node.RestrictPods(t,
		kubetest.PodReach{Addr: nodeIP, Proto: "tcp", Port: proxy.Port()},
		kubetest.PodReach{Addr: nodeIP, Proto: "udp", Port: 53},
		kubetest.PodReach{Addr: nodeIP, Proto: "tcp", Port: 53})
	e := orchtest.NewOn(t, rt, orchestrator.Config{DefaultNamespace: ns, Logger: orchtest.Logger(t)})
	_, p := e.Token(t, "alice")
	ca := "/workspace/ca.pem"
	return &kubeEgress{svc: e.Svc, ns: ns, p: p, inet: inet, node: nodeIP, proxy: proxy,
		caEnv: map[string]string{"SSL_CERT_FILE": ca, "CURL_CA_BUNDLE": ca}}
}

// start starts a server of netImage with network policy n and gives it
// the test CA.
func (k *kubeEgress) start(t *testing.T, n *egress.Policy) string {
	t.Helper()
	ctx := context.Background()
	c, err := k.svc.RegisterClient(ctx, k.p, orchestrator.RegisterClientRequest{Name: "egress", Namespace: k.ns})
	if err != nil {
		t.Fatal(err)
	}
	op, err := k.svc.StartServer(ctx, k.p, orchestrator.StartServerRequest{ClientID: c.ID, ImageTag: netImage, Network: n, WaitSeconds: deadline.Seconds()})
	if err != nil {
		t.Fatal(err)
	}
	id := serverOf(t, op)
	k.ok(t, id, "cat > /workspace/ca.pem <<'EOF'\n"+string(k.inet.CABundle)+"EOF\n")
	return id
}

func (k *kubeEgress) run(t *testing.T, id, command string) wire.BashResult {
	t.Helper()
	op, err := k.svc.RunBashCommand(context.Background(), k.p, orchestrator.RunBashRequest{
		ServerID: id, Command: command, Env: k.caEnv, WaitSeconds: deadline.Seconds()})
	if err != nil || op.Status != orchestrator.OpSucceeded {
		t.Fatalf("run %q: %+v %v", command, op, err)
	}
	var res wire.BashResult
	if err := json.Unmarshal(op.Result, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// ok runs command and fails the test unless it exits 0.
func (k *kubeEgress) ok(t *testing.T, id, command string) string {
	t.Helper()
	res := k.run(t, id, command)
	if res.ExitCode != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", command, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

// refused runs command, which must fail, fast, saying one of words.
func (k *kubeEgress) refused(t *testing.T, id, command string, words ...string) {
	t.Helper()
	began := time.Now()
	res := k.run(t, id, command)
	took := time.Since(began)
	out := res.Stdout + res.Stderr
	if res.ExitCode == 0 {
		t.Fatalf("%s succeeded; want it refused\n%s", command, out)
	}
	for _, w := range words {
		if strings.Contains(out, w) {
			// Refused at once, not after a connect timeout (curl's is
			// minutes): generous for a loaded machine.
			if took > 20*time.Second {
				t.Errorf("%s was refused after %s: a refusal must be fast", command, took)
			}
			return
		}
	}
	t.Fatalf("%s: exit %d, want one of %q in\n%s", command, res.ExitCode, words, out)
}

// TestEgressOnKubernetes: a sandbox pod reaches the test internet
// through berth's egress gateway under the public policy; the gateway
// refuses loopback, private, metadata and the host's addresses; and a
// connection around the proxy, to the internet, the node, berth or
// another pod, fails at once (the node's rules reject it).
func TestEgressOnKubernetes(t *testing.T) {
	k := newKubeEgress(t)
	id := k.start(t, &egress.Policy{Egress: egress.Public})

	t.Run("through the gateway", func(t *testing.T) {
		env := k.ok(t, id, "echo $HTTPS_PROXY $ALL_PROXY; grep ^nameserver /etc/resolv.conf")
		if want := fmt.Sprintf("http://%s socks5h://%s\nnameserver %s\n", k.proxy, k.proxy, k.node); env != want {
			t.Errorf("the pod's proxy and resolver: %q, want %q", env, want)
		}
		if got := k.ok(t, id, "curl -sS http://files.test/hello"); got != "hello from the test internet\n" {
			t.Fatalf("http: %q", got)
		}
		k.ok(t, id, "curl -sS https://tls.test/hello")
		k.ok(t, id, "curl -sS 'https://["+k.inet.Addr6("tls.test").String()+"]/hello'")
		k.ok(t, id, "curl -sS -x socks5h://"+k.proxy.String()+" http://files.test/hello")
		// The pod's resolver is berth's.
		if got := k.ok(t, id, "python3 -c 'import socket; print(socket.gethostbyname(\"files.test\"))'"); strings.TrimSpace(got) != k.inet.Addr("files.test").String() {
			t.Errorf("files.test resolved in the pod to %q", got)
		}
	})

	t.Run("refused by the gateway", func(t *testing.T) {
		hostPort := strconv.Itoa(int(k.proxy.Port()))
		for cmd, why := range map[string]string{
			"curl -sS http://rebind.test/":                                           "loopback",
			"curl -sS http://private.test/":                                          "private",
			"curl -sS http://meta.test/":                                             "metadata",
			"curl -sS http://169.254.169.254/latest/":                                "metadata",
			"curl -sS http://10.0.0.5:5432/":                                         "private",
			"curl -sS --noproxy '' http://127.0.0.1:6443/":                           "loopback",
			"curl -sS 'http://[fd00:ec2::254]/'":                                     "metadata",
			fmt.Sprintf("curl -sS http://%s:%s/", k.node, hostPort):                  "host address",
			fmt.Sprintf("curl -sS http://%s:10250/", k.inet.HostLink):                "host address",
			fmt.Sprintf("curl -sS --noproxy '' -x http://%s http://[::1]/", k.proxy): "loopback",
		} {
			// --fail-with-body: the proxy's answer says why.
			k.refused(t, id, strings.Replace(cmd, "curl -sS", "curl -sS --fail-with-body", 1), why)
		}
	})

	t.Run("around the gateway", func(t *testing.T) {
		// A listener of the host's on every address: without the node's
		// rules the pod would reach it at the node's address and at any
		// other address of the host.
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nthe host\n"))
				c.Close()
			}
		}()
		port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		other := k.start(t, nil)
		pod, err := node.Client.CoreV1().Pods(k.ns).Get(context.Background(), other, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sessionExec(t, k, other, "python3 -m http.server 8765 --bind :: >/dev/null 2>&1 &")
		// The other pod's server is up, so it is the rules that refuse.
		waitFor(t, "the other sandbox's server", func() bool {
			return k.run(t, other, "curl -sS --noproxy '*' -o /dev/null http://127.0.0.1:8765/").ExitCode == 0
		})
		for _, dest := range []string{
			k.inet.Addr("files.test").String() + ":80", // the internet, by address
			net.JoinHostPort(k.node.String(), port),    // the node (berth's host)
			net.JoinHostPort(k.inet.HostLink.String(), port),
			net.JoinHostPort(k.node.String(), "10250"), // the kubelet
			net.JoinHostPort(pod.Status.PodIP, "8765"), // another sandbox
			net.JoinHostPort(pod.Status.PodIP, "7070"), // its agent
			// Its link-local IPv6 address, from its MAC (EUI-64), which a
			// bridge would carry from pod to pod.
			"[" + linkLocal(t, k.ok(t, other, "cat /sys/class/net/eth0/address")) + "%eth0]:8765",
		} {
			k.refused(t, id, "curl -sS -m 60 -g --noproxy '*' 'http://"+dest+"/'", "Couldn't connect", "Connection refused", "No route to host", "Network is unreachable")
		}
		// UDP other than DNS to berth, and DNS to anyone else.
		for _, dest := range []string{k.inet.Addr("files.test").String() + "\", 9", k.inet.Addr("ns.test").String() + "\", 53", k.node.String() + "\", 9"} {
			k.refused(t, id, "python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(30); s.connect((\""+dest+")); s.send(b\"x\"); s.recv(10)'",
				"No route to host", "Connection refused", "Network is unreachable")
		}
	})

	t.Run("byte limit", func(t *testing.T) {
		// A download past the sandbox's byte limit is cut with an error,
		// not left hanging, and its next connection is refused.
		id := k.start(t, nil)
		k.ok(t, id, "curl -sS -o /dev/null http://files.test/bytes/1000000")
		k.refused(t, id, fmt.Sprintf("curl -sS -o /dev/null http://files.test/bytes/%d", 2*egressTestBytes), "curl: (18)", "curl: (56)", "transfer closed")
		k.refused(t, id, "curl -sS --fail-with-body http://files.test/hello", "byte limit")
	})

	t.Run("refusals are shown", func(t *testing.T) {
		waitFor(t, "the refusals in get_server's events", func() bool {
			d, err := k.svc.GetServer(context.Background(), k.p, id)
			if err != nil {
				return false
			}
			for _, ev := range d.Events {
				if ev.Reason == "EgressRefused" && strings.Contains(ev.Message, "private") {
					return true
				}
			}
			return false
		})
	})
}

// TestEgressPolicyOnKubernetes: an allowlist lets only its names through
// (by the proxy and by DNS); a changed policy decides the next
// connection; none lets nothing out.
func TestEgressPolicyOnKubernetes(t *testing.T) {
	k := newKubeEgress(t)
	id := k.start(t, &egress.Policy{Egress: egress.Allowlist, Allow: []string{"files.test"}})
	k.ok(t, id, "curl -sS http://files.test/hello")
	k.ok(t, id, "python3 -c 'import socket; socket.gethostbyname(\"files.test\")'")
	k.refused(t, id, "curl -sS https://tls.test/hello", "403")
	k.refused(t, id, "curl -sS --fail-with-body http://tls.test/hello", "allowlist")
	k.refused(t, id, "python3 -c 'import socket; socket.gethostbyname(\"tls.test\")'", "gaierror")
	ctx := context.Background()
	if _, err := k.svc.SetServerNetwork(ctx, k.p, orchestrator.SetServerNetworkRequest{ServerRef: orchestrator.ServerRef{ServerID: id},
		Network: egress.Policy{Egress: egress.Allowlist, Allow: []string{"tls.test:443"}}}); err != nil {
		t.Fatal(err)
	}
	k.ok(t, id, "curl -sS https://tls.test/hello")
	k.refused(t, id, "curl -sS --fail-with-body http://files.test/hello", "allowlist")
	if _, err := k.svc.SetServerNetwork(ctx, k.p, orchestrator.SetServerNetworkRequest{ServerRef: orchestrator.ServerRef{ServerID: id},
		Network: egress.Policy{Egress: egress.None}}); err != nil {
		t.Fatal(err)
	}
	k.refused(t, id, "curl -sS --fail-with-body http://tls.test/hello", "none")
}

// TestEgressServeOnKubernetes: the real `berth serve --runtime
// kubernetes` with its egress flags accepts a network policy over REST
// and its sandbox pod reaches what the policy allows, through the
// gateway, and no more.
func TestEgressServeOnKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Kubernetes control plane")
	}
	if !onRealNode() {
		t.Skipf("egress needs sandbox pods in real containers on a node with its own network; they run on %s", nodeNote)
	}
	inet := egresstest.Start(t)
	ctx := context.Background()
	img, err := kubetest.DebianImageWith(ctx, netImage, "", "curl")
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Node.Import(ctx, img); err != nil {
		t.Fatal(err)
	}
	nodeIP, _ := netip.AddrFromSlice(node.Node.IP.To4())
	// A free port for the proxy, which the node's rules must know first.
	l, err := net.Listen("tcp", net.JoinHostPort(nodeIP.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	node.Node.RestrictPods(t,
		kubetest.PodReach{Addr: nodeIP, Proto: "tcp", Port: uint16(port)},
		kubetest.PodReach{Addr: nodeIP, Proto: "udp", Port: 53},
		kubetest.PodReach{Addr: nodeIP, Proto: "tcp", Port: 53})
	ns := node.Namespace(t, "egress-serve")
	url, tok, _ := serveBerth(t, node, ns,
		"--kube-egress-listen", net.JoinHostPort(nodeIP.String(), strconv.Itoa(port)),
		"--kube-egress-dns-listen", net.JoinHostPort(nodeIP.String(), "53"),
		"--egress-reachable", "203.0.113.0/24", "--egress-dns", inet.DNS, "--pod-cpu", "200m", "--pod-memory", "256Mi")
	c := call(t, url, tok, "POST", "/api/clients", fmt.Sprintf(`{"name":"egress","namespace":%q}`, ns))
	op := call(t, url, tok, "POST", "/api/servers", fmt.Sprintf(`{"client_id":%q,"image_tag":%q,"wait_seconds":120,"network":{"egress":"allowlist","allow":["files.test"]}}`, c["id"], netImage))
	if op["status"] != "SUCCEEDED" {
		t.Fatalf("start: %v", op)
	}
	id := op["server_id"].(string)
	run := func(command string) map[string]any {
		return call(t, url, tok, "POST", "/api/servers/"+id+"/sessions/s/exec", fmt.Sprintf(`{"command":%q}`, command))
	}
	if out := run("curl -sS http://files.test/hello"); out["stdout"] != "hello from the test internet\n" {
		t.Fatalf("allowed: %v", out)
	}
	if out := run("curl -sS --fail-with-body http://tls.test/hello"); !strings.Contains(fmt.Sprint(out["stdout"]), "not in allowlist") {
		t.Fatalf("not allowed: %v", out)
	}
	if out := run("curl -sS -m 60 --noproxy '*' http://" + inet.Addr("files.test").String() + "/hello"); out["exit_code"] == nil || out["exit_code"] == float64(0) {
		t.Fatalf("around the proxy: %v", out)
	}
}

// linkLocal is the EUI-64 link-local address of a MAC address.
func linkLocal(t *testing.T, mac string) string {
	t.Helper()
	hw, err := net.ParseMAC(strings.TrimSpace(mac))
	if err != nil || len(hw) != 6 {
		t.Fatalf("MAC address %q: %v", mac, err)
	}
	a := [16]byte{0: 0xfe, 1: 0x80, 8: hw[0] ^ 2, 9: hw[1], 10: hw[2], 11: 0xff, 12: 0xfe, 13: hw[3], 14: hw[4], 15: hw[5]}
	return netip.AddrFrom16(a).String()
}

func sessionExec(t *testing.T, k *kubeEgress, id, command string) {
	t.Helper()
	res, err := k.svc.SessionExec(context.Background(), k.p, id, "s", wire.SessionExecRequest{Command: command})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("session: %q: %+v %v", command, res, err)
	}
}
