package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/berth-mcp/berth/internal/metrics"
	"github.com/berth-mcp/berth/internal/observe"
)

// A scanner sending thousands of distinct paths and made-up methods
// must not grow the series: every unmatched path shares one route label
// and every unknown method one method label.
func TestHTTPLabelsStayBounded(t *testing.T) {
	m := metrics.New()
	r := chi.NewRouter()
	r.Use(observe.Middleware(m.HTTP()))
	r.Get("/api/servers/{server_id}", func(http.ResponseWriter, *http.Request) {})
	for i := range 500 {
		for _, req := range []*http.Request{
			httptest.NewRequest("GET", fmt.Sprintf("/api/servers/%d", i), nil),
			httptest.NewRequest("GET", fmt.Sprintf("/wp-admin/%d.php", i), nil),
			httptest.NewRequest(fmt.Sprintf("M%d", i), "/api/servers/x", nil),
		} {
			r.ServeHTTP(httptest.NewRecorder(), req)
		}
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "berth_http_requests_total" {
			continue
		}
		got := map[string]float64{}
		for _, s := range f.GetMetric() {
			key := ""
			for _, l := range s.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + " "
			}
			got[key] = s.GetCounter().GetValue()
		}
		want := map[string]float64{
			"method=GET route=/api/servers/{server_id} status_class=2xx ": 500,
			"method=GET route=unmatched status_class=4xx ":                500,
			"method=OTHER route=unmatched status_class=4xx ":              500,
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("series %v, want %v", got, want)
		}
		return
	}
	t.Fatal("no berth_http_requests_total")
}
