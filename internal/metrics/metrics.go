// Package metrics owns berth's Prometheus metrics: the registry, the
// observers of HTTP requests, tool calls, operations, commands and
// runtime calls (internal/observe's hooks, their labels bound once), and
// the collectors that read at scrape time what every replica shares
// (servers by state from PostgreSQL) or what is this process's own (the
// database pool). Labels are bounded sets: route patterns, tool names,
// operation types, outcomes; never an id, a user or a raw path.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berth-mcp/berth/internal/auth"
	"github.com/berth-mcp/berth/internal/observe"
)

// durationBuckets cover a health probe (milliseconds) to a sandbox start
// or a long command (minutes).
var durationBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics is one registry with berth's metrics.
type Metrics struct {
	reg  *prometheus.Registry
	http *httpMetrics

	tools, operations, execs, runtime *timed
	authFailures                      *prometheus.CounterVec
	warmClaims                        *prometheus.CounterVec
	egress                            *prometheus.CounterVec
}

// New returns the metrics, with the Go runtime's and the process's.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		reg:        reg,
		http:       newHTTPMetrics(reg),
		tools:      newTimed(reg, "mcp_tool_calls", "MCP tool calls", "tool"),
		operations: newTimed(reg, "operations", "operations run by this replica's workers", "type"),
		execs:      newTimed(reg, "exec", "commands run in sandboxes (session: a persistent shell; command: run_bash_command)", "kind"),
		runtime:    newTimed(reg, "runtime_calls", "calls of the sandbox runtime's API", "method"),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_auth_failures_total",
			Help: "Requests refused by authentication, by reason."}, []string{"reason"}),
		warmClaims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_warm_pool_claims_total",
			Help: "Starts that could take a warm-pool server: result hit (took one) or miss (none was ready)."}, []string{"result"}),
	}
	m.egress = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_egress_connections_total",
		Help: "Connections and lookups of sandboxes through the egress gateway: outcome allowed or refused, with the rule that refused (reason); never the destination."},
		[]string{"outcome", "reason"})
	reg.MustRegister(m.authFailures, m.warmClaims, m.egress)
	for _, f := range auth.Failures {
		m.authFailures.WithLabelValues(string(f))
	}
	m.warmClaims.WithLabelValues("hit")
	m.warmClaims.WithLabelValues("miss")
	return m
}

// Registry is where further collectors go.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// HTTP observes requests (api.Options.Observe).
func (m *Metrics) HTTP() observe.HTTPObserver { return m.http.observe }

// Tool observes MCP tool calls (mcpserver.Options.Tool).
func (m *Metrics) Tool() observe.Hook { return m.tools.hook }

// Runtime observes runtime calls (runtime.Observed).
func (m *Metrics) Runtime() observe.Hook { return m.runtime.hook }

// Hooks observe the orchestrator's operations, commands and warm-pool
// claims (orchestrator.Config.Observe).
func (m *Metrics) Hooks() observe.Hooks {
	hit, miss := m.warmClaims.WithLabelValues("hit"), m.warmClaims.WithLabelValues("miss")
	allowed := m.egress.WithLabelValues("allowed", "")
	return observe.Hooks{
		Operation: m.operations.hook,
		Exec:      m.execs.hook,
		Egress: func(reason string) {
			if reason == "" {
				allowed.Inc()
				return
			}
			m.egress.WithLabelValues("refused", reason).Inc()
		},
		WarmClaim: func(took bool) {
			if took {
				hit.Inc()
			} else {
				miss.Inc()
			}
		},
	}
}

// AuthFailed counts refused requests (auth.MiddlewareOptions.Failed).
func (m *Metrics) AuthFailed() func(auth.Failure) {
	bound := map[auth.Failure]prometheus.Counter{}
	for _, f := range auth.Failures {
		bound[f] = m.authFailures.WithLabelValues(string(f))
	}
	// Read only after this point: no lock needed.
	return func(f auth.Failure) {
		if c, ok := bound[f]; ok {
			c.Inc()
		}
	}
}

// timed is a count and a duration histogram of work by name and outcome
// (ok or error).
type timed struct {
	total *prometheus.CounterVec
	dur   *prometheus.HistogramVec
}

func newTimed(reg *prometheus.Registry, name, help, label string) *timed {
	t := &timed{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "berth_" + name + "_total",
			Help: "Count of " + help + ", by " + label + " and outcome."}, []string{label, "outcome"}),
		dur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "berth_" + name + "_duration_seconds",
			Help: "Duration of " + help + ", by " + label + " and outcome.", Buckets: durationBuckets}, []string{label, "outcome"}),
	}
	reg.MustRegister(t.total, t.dur)
	return t
}

// hook binds a name's series once; a call then costs a clock read and
// two atomic adds.
func (t *timed) hook(name string) observe.Start {
	okN, errN := t.total.WithLabelValues(name, "ok"), t.total.WithLabelValues(name, "error")
	okD, errD := t.dur.WithLabelValues(name, "ok"), t.dur.WithLabelValues(name, "error")
	return func(ctx context.Context) (context.Context, observe.Done) {
		start := time.Now()
		return ctx, func(err error) {
			d := time.Since(start).Seconds()
			if err != nil {
				errN.Inc()
				errD.Observe(d)
				return
			}
			okN.Inc()
			okD.Observe(d)
		}
	}
}
