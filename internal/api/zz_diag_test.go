package api_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"sync"
	"testing"
	"time"
)

func BenchmarkDiag(b *testing.B) {
	s := newBenchServer(b)
	post(b, s.agent, "http://sandbox/api/tools/bash", s.token, []byte(fmt.Sprintf(`{"command":"head -c %d /dev/urandom > big.bin"}`, benchFileBytes)))
	fwd := s.e.url + "/api/forward/" + s.clientID + "/" + s.serverID
	plain := func(flush time.Duration) string {
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "sandbox"
				pr.Out.Header.Set("Authorization", "Bearer "+s.token)
			},
			Transport:     s.agent.Transport,
			FlushInterval: flush,
		}
		ts := httptest.NewServer(rp)
		b.Cleanup(ts.Close)
		return ts.URL
	}
	p0, pm1 := plain(0), plain(-1)
	b.Run("seq-health", func(b *testing.B) { streamsN(b, 1, s.web, s.e.url+"/healthz", s.e.alice) })
	b.Run("seq-whoami", func(b *testing.B) { streamsN(b, 1, s.web, s.e.url+"/api/whoami", s.e.alice) })
	b.Run("seq-getserver", func(b *testing.B) { streamsN(b, 1, s.web, s.e.url+"/api/servers/"+s.serverID, s.e.alice) })
	b.Run("seq-caps-direct", func(b *testing.B) { streamsN(b, 1, s.agent, "http://sandbox/api/capabilities", s.token) })
	b.Run("seq-caps-fwd", func(b *testing.B) { streamsN(b, 1, s.web, fwd+"/api/capabilities", s.e.alice) })
	b.Run("big32-direct", func(b *testing.B) { streamsN(b, 32, s.agent, "http://sandbox/api/fs/archive?path=big.bin", s.token) })
	b.Run("big32-fwd", func(b *testing.B) { streamsN(b, 32, s.web, fwd+"/api/fs/archive?path=big.bin", s.e.alice) })
	b.Run("big32-plainproxy-flush0", func(b *testing.B) { streamsN(b, 32, s.web, p0+"/api/fs/archive?path=big.bin", s.e.alice) })
	b.Run("big32-plainproxy-flush-1", func(b *testing.B) { streamsN(b, 32, s.web, pm1+"/api/fs/archive?path=big.bin", s.e.alice) })
	b.Run("caps32-plainproxy", func(b *testing.B) { streamsN(b, 32, s.web, p0+"/api/capabilities", s.e.alice) })
	b.Run("caps32-direct", func(b *testing.B) { streamsN(b, 32, s.agent, "http://sandbox/api/capabilities", s.token) })
	b.Run("caps32-fwd", func(b *testing.B) { streamsN(b, 32, s.web, fwd+"/api/capabilities", s.e.alice) })
	b.Run("whoami32", func(b *testing.B) { streamsN(b, 32, s.web, s.e.url+"/api/whoami", s.e.alice) })
	b.Run("big1-direct", func(b *testing.B) { streamsN(b, 1, s.agent, "http://sandbox/api/fs/archive?path=big.bin", s.token) })
	b.Run("big1-fwd", func(b *testing.B) { streamsN(b, 1, s.web, fwd+"/api/fs/archive?path=big.bin", s.e.alice) })
	b.Run("big4-direct", func(b *testing.B) { streamsN(b, 4, s.agent, "http://sandbox/api/fs/archive?path=big.bin", s.token) })
	b.Run("big4-fwd", func(b *testing.B) { streamsN(b, 4, s.web, fwd+"/api/fs/archive?path=big.bin", s.e.alice) })
}

func streamsN(b *testing.B, n int, client *http.Client, url, token string) {
	for b.Loop() {
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				req, _ := http.NewRequest("GET", url, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if err != nil {
					panic(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					panic(resp.Status)
				}
			})
		}
		wg.Wait()
	}
}
