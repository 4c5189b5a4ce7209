package forward

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
)

const (
	benchStreams   = 32
	benchBodyBytes = 1 << 20
)

// BenchmarkForward32Streams has 32 clients download 1 MiB each at the same
// time, straight from the backend (the baseline) and through the
// forwarder. One op is one round of 32 downloads.
func BenchmarkForward32Streams(b *testing.B) {
	body := make([]byte, benchBodyBytes)
	_, _ = io.ReadFull(&pattern{}, body)
	for _, network := range networks {
		ep := startBackend(b, network, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body)
		}))
		suffix := ""
		if network == "unix" {
			suffix = "-unix"
		}

		b.Run("direct"+suffix, func(b *testing.B) {
			// The client dials the backend with a transport like the
			// forwarder's, so only the extra hop differs.
			tr := NewTransports()
			defer tr.Close()
			client := &http.Client{Transport: tr.For(ep)}
			runStreams(b, client, "http://"+agentHost+"/api/download")
		})

		b.Run("forwarded"+suffix, func(b *testing.B) {
			front := startFront(b, newForwarder(b, nil), Target{ServerID: "bench", Endpoint: ep, Token: testToken}, nil)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			defer client.CloseIdleConnections()
			runStreams(b, client, front.URL+"/fwd/api/download")
		})
	}
}

func runStreams(b *testing.B, client *http.Client, url string) {
	b.SetBytes(benchStreams * benchBodyBytes)
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, benchStreams)
		for range benchStreams {
			wg.Go(func() {
				resp, err := client.Get(url)
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				n, err := io.Copy(io.Discard, resp.Body)
				if err == nil && n != benchBodyBytes {
					err = io.ErrUnexpectedEOF
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
