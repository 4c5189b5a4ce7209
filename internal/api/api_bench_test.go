package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/berth-mcp/berth/internal/forward"
	"github.com/berth-mcp/berth/internal/orchestrator"
	"github.com/berth-mcp/berth/internal/orchestrator/orchtest"
	"github.com/berth-mcp/berth/internal/wire"
)

// benchServer is a running server of alice's for benchmarks, with a
// client straight to its agent's unix socket as the baseline.
type benchServer struct {
	e        *testEnv
	clientID string
	serverID string
	// web talks to berth; keep-alive for as many streams as the
	// benchmarks open.
	web *http.Client
	// agent talks to the agent's socket directly, with the transport
	// berth itself uses to reach agents; token is the agent's.
	agent *http.Client
	token string
}

func newBenchServer(b *testing.B) *benchServer {
	b.Helper()
	e := newTestServer(b)
	c := e.registerClient(b, e.alice, "bench")
	srv := e.startServer(b, e.alice, c.ID).ServerID
	// Agent tokens are derived from the server key, as berth does.
	tok := orchestrator.AgentToken(orchtest.ServerKey, srv)
	tr := forward.NewTransports()
	b.Cleanup(func() { tr.Close() })
	// The runtime knows where the socket is: a deep data dir moves it
	// out of the sandbox directory (unix socket paths are short).
	ep, err := e.Runtime.WaitReady(context.Background(), srv)
	if err != nil {
		b.Fatal(err)
	}
	web := &http.Client{Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	b.Cleanup(web.CloseIdleConnections)
	return &benchServer{
		e: e, clientID: c.ID, serverID: srv, web: web,
		agent: &http.Client{Transport: tr.For(ep)}, token: tok,
	}
}

// post sends a JSON body and returns the answer, failing unless it is 200.
func post(b *testing.B, client *http.Client, url, token string, body []byte) []byte {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("POST %s: %d %s (%v)", url, resp.StatusCode, raw, err)
	}
	return raw
}

func wantTrue(b *testing.B, raw []byte) {
	var res wire.BashResult
	if err := json.Unmarshal(raw, &res); err != nil || res.ExitCode != 0 {
		b.Fatalf("true: %s (%v)", raw, err)
	}
}

// BenchmarkRunBashTrue runs `true` three ways: straight on the agent's
// socket (the baseline), forwarded through berth's REST API, and as a
// run_bash_command operation with wait_seconds, which goes through
// PostgreSQL, an operation worker and LISTEN/NOTIFY.
func BenchmarkRunBashTrue(b *testing.B) {
	s := newBenchServer(b)
	body := []byte(`{"command":"true"}`)

	b.Run("agent-direct", func(b *testing.B) {
		for b.Loop() {
			wantTrue(b, post(b, s.agent, "http://sandbox/api/tools/bash", s.token, body))
		}
	})
	b.Run("forwarded", func(b *testing.B) {
		url := s.e.url + "/api/forward/" + s.clientID + "/" + s.serverID + "/api/tools/bash"
		for b.Loop() {
			wantTrue(b, post(b, s.web, url, s.e.alice, body))
		}
	})
	b.Run("rest-op", func(b *testing.B) {
		url := s.e.url + "/api/servers/" + s.serverID + "/bash"
		opBody := []byte(`{"command":"true","wait_seconds":60}`)
		for b.Loop() {
			var op orchestrator.Operation
			if err := json.Unmarshal(post(b, s.web, url, s.e.alice, opBody), &op); err != nil {
				b.Fatal(err)
			}
			if op.Status != orchestrator.OpSucceeded || op.Result == nil {
				b.Fatalf("operation %s is %s (%s)", op.ID, op.Status, op.Error)
			}
			wantTrue(b, op.Result)
		}
	})
}

const (
	benchStreams   = 32
	benchFileBytes = 1 << 20
)

// BenchmarkForward32Streams downloads a 1 MiB file as a tar 32 times at
// once, straight from the agent's socket (the baseline) and through
// berth's forward route. One op is one round of 32 downloads.
func BenchmarkForward32Streams(b *testing.B) {
	s := newBenchServer(b)
	post(b, s.agent, "http://sandbox/api/tools/bash", s.token,
		[]byte(fmt.Sprintf(`{"command":"head -c %d /dev/urandom > big.bin"}`, benchFileBytes)))
	// The archive holds the file plus tar headers and padding.
	size := func(client *http.Client, url, token string) int64 {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d (%v)", url, resp.StatusCode, err)
		}
		return n
	}
	direct := "http://sandbox/api/fs/archive?path=big.bin"
	forwarded := s.e.url + "/api/forward/" + s.clientID + "/" + s.serverID + "/api/fs/archive?path=big.bin"
	want := size(s.agent, direct, s.token)
	if want < benchFileBytes {
		b.Fatalf("archive of a %d-byte file is %d bytes", benchFileBytes, want)
	}

	b.Run("direct", func(b *testing.B) { streams(b, s.agent, direct, s.token, want) })
	b.Run("forwarded", func(b *testing.B) { streams(b, s.web, forwarded, s.e.alice, want) })
}

func streams(b *testing.B, client *http.Client, url, token string, want int64) {
	b.SetBytes(benchStreams * want)
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, benchStreams)
		for range benchStreams {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				n, err := io.Copy(io.Discard, resp.Body)
				if err == nil && (resp.StatusCode != http.StatusOK || n != want) {
					err = fmt.Errorf("GET %s: %d with %d bytes, want 200 with %d", url, resp.StatusCode, n, want)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
}
