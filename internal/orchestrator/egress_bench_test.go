//go:build linux

package orchestrator_test

import (
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-mcp/berth/internal/egress"
	"github.com/berth-mcp/berth/internal/orchestrator"
)

// egressDownloadBytes is the download of BenchmarkEgressDownload: the
// issue's 100 MB.
const egressDownloadBytes = 100 << 20

// BenchmarkEgressDownload downloads 100 MB from the test internet with
// curl, from the host (straight to the address) and from inside a
// sandbox (through its egress gateway, by name): docs/benchmarks.md
// reports sandbox/host. Each iteration is one download.
func BenchmarkEgressDownload(b *testing.B) {
	e := newEgressBench(b)
	url := "http://files.test/bytes/" + strconv.Itoa(egressDownloadBytes)
	direct := "http://" + e.inet.Addr("files.test").String() + "/bytes/" + strconv.Itoa(egressDownloadBytes)
	b.Run("host", func(b *testing.B) {
		b.SetBytes(egressDownloadBytes)
		for b.Loop() {
			if out, err := exec.Command("curl", "-sSf", "--noproxy", "*", "-o", "/dev/null", direct).CombinedOutput(); err != nil {
				b.Fatalf("host download: %v %s", err, out)
			}
		}
	})
	b.Run("sandbox", func(b *testing.B) {
		b.SetBytes(egressDownloadBytes)
		for b.Loop() {
			e.ok(b, "curl -sSf -o /dev/null "+url)
		}
	})
}

// BenchmarkEgressConnect measures the setup of a connection and one
// small request (curl's time_total for /hello), 50 per iteration, from
// the host and from a sandbox through its gateway, and reports the p50
// in milliseconds: docs/benchmarks.md reports sandbox minus host.
func BenchmarkEgressConnect(b *testing.B) {
	e := newEgressBench(b)
	loop := func(url string, extra string) string {
		return "for i in $(seq 50); do curl -s " + extra + " -o /dev/null -w '%{time_total}\\n' " + url + "; done"
	}
	host := loop("http://"+e.inet.Addr("files.test").String()+"/hello", "--noproxy '*'")
	sandbox := loop("http://files.test/hello", "")
	b.Run("host", func(b *testing.B) {
		var all []float64
		for b.Loop() {
			out, err := exec.Command("bash", "-c", host).Output()
			if err != nil {
				b.Fatalf("host: %v", err)
			}
			all = append(all, seconds(b, string(out))...)
		}
		b.ReportMetric(p50(all)*1000, "p50-ms")
	})
	b.Run("sandbox", func(b *testing.B) {
		var all []float64
		for b.Loop() {
			all = append(all, seconds(b, e.ok(b, sandbox))...)
		}
		b.ReportMetric(p50(all)*1000, "p50-ms")
	})
}

// egressBench is a sandbox with the public policy on the test internet.
type egressBench struct {
	*egressEnv
	id string
}

func newEgressBench(b *testing.B) egressBench {
	b.Helper()
	e := newEgressEnv(b, egress.Limits{}, orchestrator.Config{})
	return egressBench{egressEnv: e, id: e.start(b, &egress.Policy{Egress: egress.Public})}
}

func (e egressBench) ok(b *testing.B, command string) string {
	b.Helper()
	return e.egressEnv.ok(b, e.id, command)
}

func seconds(b *testing.B, out string) []float64 {
	b.Helper()
	var v []float64
	for _, f := range strings.Fields(out) {
		s, err := strconv.ParseFloat(strings.ReplaceAll(f, ",", "."), 64)
		if err != nil {
			b.Fatalf("curl time %q: %v", f, err)
		}
		v = append(v, s)
	}
	return v
}

func p50(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}
