package metrics

import (
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-mcp/berth/internal/observe"
)

// httpMetrics count and time requests by route pattern, method and
// status class.
type httpMetrics struct {
	total *prometheus.CounterVec
	dur   *prometheus.HistogramVec
	// bound holds each label set's series once it was seen: a lock-free
	// read on the hot path instead of the vectors' hashing and locking.
	bound sync.Map // httpKey -> *httpSeries
}

type httpKey struct {
	route, method string
	class         int
}

type httpSeries struct {
	total prometheus.Counter
	dur   prometheus.Observer
}

func newHTTPMetrics(reg *prometheus.Registry) *httpMetrics {
	h := &httpMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_http_requests_total",
			Help: "HTTP requests, by route pattern, method and status class."}, []string{"route", "method", "status_class"}),
		dur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_http_request_duration_seconds",
			Help: "Time to serve an HTTP request, by route pattern, method and status class.", Buckets: durationBuckets},
			[]string{"route", "method", "status_class"}),
	}
	reg.MustRegister(h.total, h.dur)
	return h
}

var statusClasses = [...]string{"1xx", "1xx", "2xx", "3xx", "4xx", "5xx"}

// knownMethods bound the method label: any other is "OTHER".
var knownMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

func (h *httpMetrics) observe(r *http.Request) (*http.Request, func(*observe.Request)) {
	return r, h.done
}

func (h *httpMetrics) done(info *observe.Request) {
	class := info.Status / 100
	if class < 1 || class > 5 {
		class = 5
	}
	method := info.Method
	if !knownMethods[method] {
		method = "OTHER"
	}
	k := httpKey{route: info.Route, method: method, class: class}
	s, ok := h.bound.Load(k)
	if !ok {
		s = h.bind(k)
	}
	series := s.(*httpSeries)
	series.total.Inc()
	series.dur.Observe(info.Duration.Seconds())
}

// bind makes a label set's series. Unmatched routes (the console's pages,
// unknown paths) share one label, so a scanner's paths add no series.
func (h *httpMetrics) bind(k httpKey) any {
	route := k.route
	if route == "" {
		route = "unmatched"
	}
	s := &httpSeries{
		total: h.total.WithLabelValues(route, k.method, statusClasses[k.class]),
		dur:   h.dur.WithLabelValues(route, k.method, statusClasses[k.class]),
	}
	v, _ := h.bound.LoadOrStore(k, s)
	return v
}
