package kubetest

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeReadiness runs the container's readiness probe on its schedule
// (initialDelaySeconds, periodSeconds, timeoutSeconds, success and
// failure thresholds) and sets the container's Ready from it, until ctx
// ends with the attempt.
func (c *container) probeReadiness(ctx context.Context) {
	pr := c.spec.ReadinessProbe
	period := secondsOr(pr.PeriodSeconds, 10)
	timeout := secondsOr(pr.TimeoutSeconds, 1)
	successes, failures := int32(0), int32(0)
	needOK, needFail := max(pr.SuccessThreshold, 1), max(pr.FailureThreshold, 3)
	// A kubelet probes the first time at once after the initial delay.
	wait := time.Duration(pr.InitialDelaySeconds) * time.Second
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = period
		pctx, cancel := context.WithTimeout(ctx, timeout)
		err := c.probeOnce(pctx, pr)
		cancel()
		if ctx.Err() != nil {
			return
		}
		c.w.mu.Lock()
		was := c.status.Ready
		if err == nil {
			successes, failures = successes+1, 0
			if successes >= needOK {
				c.status.Ready = true
			}
		} else {
			successes, failures = 0, failures+1
			if failures >= needFail || !was {
				c.status.Ready = false
			}
		}
		changed := was != c.status.Ready
		c.w.mu.Unlock()
		if changed {
			c.w.markDirty()
		}
		if err != nil {
			c.w.event(ctx, corev1.EventTypeWarning, "Unhealthy", "Readiness probe failed: "+err.Error())
		}
	}
}

// probeOnce runs one probe: httpGet (2xx and 3xx pass), tcpSocket or exec.
func (c *container) probeOnce(ctx context.Context, pr *corev1.Probe) error {
	w := c.w
	w.mu.Lock()
	ip := w.ip
	w.mu.Unlock()
	switch {
	case pr.HTTPGet != nil:
		g := pr.HTTPGet
		host := g.Host
		if host == "" {
			host = ip
		}
		port, err := c.port(g.Port)
		if err != nil {
			return err
		}
		scheme := "http"
		if g.Scheme == corev1.URISchemeHTTPS {
			scheme = "https"
		}
		url := scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + g.Path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", "kube-probe/1.37")
		for _, h := range g.HTTPHeaders {
			req.Header.Set(h.Name, h.Value)
		}
		// A kubelet does not verify a probed pod's certificate either.
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			return fmt.Errorf("Get %q: %w", url, err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
		}
		return nil
	case pr.TCPSocket != nil:
		host := pr.TCPSocket.Host
		if host == "" {
			host = ip
		}
		port, err := c.port(pr.TCPSocket.Port)
		if err != nil {
			return err
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case pr.Exec != nil:
		pod := w.latest()
		_, img := w.k.images.resolve(c.spec.Image)
		env, err := w.containerEnv(ctx, pod, c)
		if err != nil {
			return err
		}
		rw, err := c.rewriter(env, img)
		if err != nil {
			return err
		}
		argv := make([]string, len(pr.Exec.Command))
		for i, a := range pr.Exec.Command {
			argv[i] = rw.rewrite(a)
		}
		if len(argv) == 0 {
			return fmt.Errorf("exec probe without a command")
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env, cmd.Dir = env.environ(rw.rewrite), c.root()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("command %q failed: %w: %s", pr.Exec.Command, err, out)
		}
		return nil
	}
	return fmt.Errorf("probe has no handler kubetest supports")
}

// port resolves a probe port, by number or by the container port's name.
func (c *container) port(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("port %q is not a named port of container %s", p.StrVal, c.spec.Name)
}

func secondsOr(s, def int32) time.Duration {
	if s <= 0 {
		s = def
	}
	return time.Duration(s) * time.Second
}
