package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serviceCIDR is the Service IP range the API server allocates from. No
// traffic goes there (there is no kube-proxy): it only has to be valid.
const (
	serviceCIDR = "10.96.0.0/24"
	serviceIP   = "10.96.0.1" // the kubernetes Service, first of serviceCIDR
)

// controllers are the kube-controller-manager controllers a test may lean
// on. The node lifecycle controller is among them (it lifts the not-ready
// taint new Nodes get); taint-based eviction is not, so a loaded machine
// that delays a Lease renewal never evicts a test's pods.
var controllers = []string{
	"job-controller", "cronjob-controller", "ttl-after-finished-controller",
	"deployment-controller", "replicaset-controller", "statefulset-controller",
	"disruption-controller", "garbage-collector-controller", "namespace-controller",
	"serviceaccount-controller", "serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller",
	"resourcequota-controller", "node-lifecycle-controller", "pod-garbage-collector-controller",
}

// controlPlane is the running real components.
type controlPlane struct {
	host       string // https://127.0.0.1:port of kube-apiserver
	apiPort    int
	adminToken string
	pki        *pki
	components []*component // in start order
}

// startControlPlane starts etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler with their data and logs under dir, and returns when
// each is healthy.
func startControlPlane(ctx context.Context, bins binaries, dir string) (cp *controlPlane, err error) {
	cp = &controlPlane{}
	started := cp // cp is nil when an error is returned
	defer func() {
		if err != nil {
			started.stop()
		}
	}()
	if cp.pki, err = newPKI(dir); err != nil {
		return nil, err
	}
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer, apiPort, kcmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	cp.apiPort = apiPort
	cp.host = "https://127.0.0.1:" + strconv.Itoa(apiPort)

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	etcd, err := cp.start("etcd", bins.etcd, dir, []string{
		"--name=kubetest",
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=kubetest=" + peerURL,
		// The data is thrown away with the test: durability only costs time.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	})
	if err != nil {
		return nil, err
	}
	if err := etcd.waitReady(ctx, httpProbe(http.DefaultClient, etcdURL+"/health", "")); err != nil {
		return nil, err
	}

	// Identities: an admin, and the two components, by static tokens (the
	// users RBAC's bootstrap policy grants the components' roles to).
	tokens := map[string]string{}
	for _, u := range []string{"admin", "system:kube-controller-manager", "system:kube-scheduler"} {
		tokens[u] = randomToken()
	}
	cp.adminToken = tokens["admin"]
	var tf strings.Builder
	fmt.Fprintf(&tf, "%s,admin,admin,\"system:masters\"\n", tokens["admin"])
	fmt.Fprintf(&tf, "%s,system:kube-controller-manager,kcm,\n", tokens["system:kube-controller-manager"])
	fmt.Fprintf(&tf, "%s,system:kube-scheduler,scheduler,\n", tokens["system:kube-scheduler"])
	tokenFile := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(tf.String()), 0o600); err != nil {
		return nil, fmt.Errorf("write token file: %w", err)
	}
	p := cp.pki
	api, err := cp.start("kube-apiserver", bins.apiserver, dir, []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + p.ServeCert, "--tls-private-key-file=" + p.ServeKey,
		"--client-ca-file=" + p.CA,
		"--token-auth-file=" + tokenFile,
		// Node for a real node's kubelet (user system:node:<name>), RBAC
		// for everyone else.
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + p.SAPub,
		"--service-account-signing-key-file=" + p.SAKey,
		"--service-cluster-ip-range=" + serviceCIDR,
		// The kubernetes Service's endpoints would be 127.0.0.1, which
		// EndpointSlice validation refuses; nothing here routes to it.
		"--endpoint-reconciler-type=none",
		"--kubelet-client-certificate=" + p.KubeletClientCert,
		"--kubelet-client-key=" + p.KubeletClientKey,
		"--kubelet-certificate-authority=" + p.CA,
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
	})
	if err != nil {
		return nil, err
	}
	if err := api.waitReady(ctx, httpProbe(cp.httpClient(), cp.host+"/readyz", cp.adminToken)); err != nil {
		return nil, err
	}

	kcmConfig := filepath.Join(dir, "kube-controller-manager.kubeconfig")
	schedConfig := filepath.Join(dir, "kube-scheduler.kubeconfig")
	if err := writeKubeconfig(kcmConfig, cp.configWithToken(tokens["system:kube-controller-manager"]), "kube-system"); err != nil {
		return nil, err
	}
	if err := writeKubeconfig(schedConfig, cp.configWithToken(tokens["system:kube-scheduler"]), "kube-system"); err != nil {
		return nil, err
	}
	kcm, err := cp.start("kube-controller-manager", bins.controllerManager, dir, []string{
		"--kubeconfig=" + kcmConfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(kcmPort),
		"--tls-cert-file=" + p.ServeCert, "--tls-private-key-file=" + p.ServeKey,
		"--leader-elect=false",
		// Each controller acts as its own ServiceAccount, as in a cluster,
		// so RBAC's bootstrap roles for them are exercised too.
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + p.SAKey,
		"--root-ca-file=" + p.CA,
		"--controllers=" + strings.Join(controllers, ","),
		"--node-monitor-grace-period=2m",
		"--profiling=false",
	})
	if err != nil {
		return nil, err
	}
	sched, err := cp.start("kube-scheduler", bins.scheduler, dir, []string{
		"--kubeconfig=" + schedConfig,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(schedPort),
		"--tls-cert-file=" + p.ServeCert, "--tls-private-key-file=" + p.ServeKey,
		"--leader-elect=false",
		"--profiling=false",
	})
	if err != nil {
		return nil, err
	}
	if err := kcm.waitReady(ctx, httpProbe(cp.httpClient(), "https://127.0.0.1:"+strconv.Itoa(kcmPort)+"/healthz", "")); err != nil {
		return nil, err
	}
	if err := sched.waitReady(ctx, httpProbe(cp.httpClient(), "https://127.0.0.1:"+strconv.Itoa(schedPort)+"/healthz", "")); err != nil {
		return nil, err
	}
	return cp, nil
}

// start runs one component logging to dir/<name>.log and records it for stop.
func (cp *controlPlane) start(name, bin, dir string, args []string) (*component, error) {
	c, err := startComponent(name, bin, args, filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cp.components = append(cp.components, c)
	return c, nil
}

// stop ends the components, last started first.
func (cp *controlPlane) stop() {
	for i := len(cp.components) - 1; i >= 0; i-- {
		cp.components[i].stop(5 * time.Second)
	}
	cp.components = nil
}

// failed returns an error for the first component that is no longer running.
func (cp *controlPlane) failed() error {
	for _, c := range cp.components {
		select {
		case <-c.done:
			return c.exited()
		default:
		}
	}
	return nil
}

// configWithToken is a client config for the API server as the token's user.
func (cp *controlPlane) configWithToken(token string) *rest.Config {
	return &rest.Config{
		Host:            cp.host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.pki.caPEM},
	}
}

// httpClient trusts the control plane's CA.
func (cp *controlPlane) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.pki.caPEM)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

// httpProbe returns a probe that GETs url and wants 200.
func httpProbe(c *http.Client, url, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%w: %s: %s", errNotReady, resp.Status, body)
		}
		return nil
	}
}

// writeKubeconfig writes cfg (host, CA, bearer token) as a kubeconfig
// file whose context is in namespace.
func writeKubeconfig(path string, cfg *rest.Config, namespace string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["kubetest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["kubetest"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["kubetest"] = &clientcmdapi.Context{Cluster: "kubetest", AuthInfo: "kubetest", Namespace: namespace}
	kc.CurrentContext = "kubetest"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
