package forward

import (
	"bufio"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestForwardStreamsWithoutBuffering has the agent write a chunk and then
// wait for the test: the caller must get the chunk before the test lets the
// agent go on, which it can only do if nothing buffers the body. The
// response has a Content-Length and no event-stream type, so ReverseProxy's
// own flushing heuristics do not kick in; only FlushInterval -1 helps.
func TestForwardStreamsWithoutBuffering(t *testing.T) {
	for _, network := range networks {
		t.Run(network, func(t *testing.T) {
			release := make(chan struct{})
			ep := startBackend(t, network, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/plain")
				w.Header().Set("Content-Length", strconv.Itoa(len("data: first\n\ndata: second\n\n")))
				_, _ = io.WriteString(w, "data: first\n\n")
				http.NewResponseController(w).Flush()
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
				_, _ = io.WriteString(w, "data: second\n\n")
			}))
			front := startFront(t, newForwarder(t, nil), Target{ServerID: "s1", Endpoint: ep, Token: testToken}, nil)

			// The deadline turns a buffering forwarder into a failure
			// instead of a hang.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/fwd/api/events", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				close(release)
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			if err != nil || line != "data: first\n" {
				close(release)
				t.Fatalf("first line = %q, %v; want it before the agent is released", line, err)
			}
			close(release)
			rest, err := io.ReadAll(br)
			if err != nil || string(rest) != "\ndata: second\n\n" {
				t.Fatalf("rest = %q, %v", rest, err)
			}
		})
	}
}

const bigBody = 100 << 20

// TestForwardLargeBodies moves 100 MiB each way through the forwarder and
// checks that the process allocated far less than that while doing so: the
// bodies are streamed, not held.
func TestForwardLargeBodies(t *testing.T) {
	ep := startBackend(t, "unix", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPut:
			h := crc32.NewIEEE()
			n, err := io.Copy(h, r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "%d %08x", n, h.Sum32())
		case http.MethodGet:
			w.Header().Set("Content-Length", strconv.Itoa(bigBody))
			_, _ = io.CopyN(w, &pattern{}, bigBody)
		}
	}))
	front := startFront(t, newForwarder(t, nil), Target{ServerID: "s1", Endpoint: ep, Token: testToken}, nil)

	want := crc32.NewIEEE()
	_, _ = io.CopyN(want, &pattern{}, bigBody)
	wantSum := fmt.Sprintf("%d %08x", bigBody, want.Sum32())

	before := memStats()

	req, _ := http.NewRequest(http.MethodPut, front.URL+"/fwd/api/upload", io.LimitReader(&pattern{}, bigBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(got) != wantSum {
		t.Fatalf("upload: %d %q %v; want 200 %q", resp.StatusCode, got, err, wantSum)
	}

	resp, err = http.Get(front.URL + "/fwd/api/download")
	if err != nil {
		t.Fatal(err)
	}
	h := crc32.NewIEEE()
	n, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	if err != nil || n != bigBody || h.Sum32() != want.Sum32() {
		t.Fatalf("download: %d bytes, crc %08x, %v; want %d bytes, crc %08x", n, h.Sum32(), err, bigBody, want.Sum32())
	}

	after := memStats()
	allocated := after.TotalAlloc - before.TotalAlloc
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("moved %d MiB each way; allocated %.1f MiB in total, heap in use grew %.1f MiB",
		bigBody>>20, float64(allocated)/(1<<20), float64(grown)/(1<<20))
	// Allocating a tenth of the body in total (not just at peak) still
	// means nothing held it whole.
	if allocated > bigBody/10 {
		t.Errorf("allocated %d bytes while moving %d each way: bodies are being buffered", allocated, bigBody)
	}
}

func memStats() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
