package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-mcp/berth/internal/runtime"
	"github.com/berth-mcp/berth/internal/store"
)

// serverStates are the states berth_servers always reports, 0 included,
// so a dashboard's series do not come and go.
var serverStates = []string{"STARTING", "RUNNING", "FINISHED", "STOPPING", "STOPPED", "FAILED"}

var (
	serversDesc   = prometheus.NewDesc("berth_servers", "Servers by state, counted in the database (the same on every replica).", []string{"state"}, nil)
	warmDesc      = prometheus.NewDesc("berth_warm_pool_servers", "Warm-pool servers ready to be taken, counted in the database.", nil, nil)
	unhealthyDesc = prometheus.NewDesc("berth_unhealthy_servers",
		"Running and finished servers whose agent fails its health checks, counted in the database.", nil, nil)
)

// serversCollector reads the servers' counts from PostgreSQL when
// scraped, at most once per ttl: every replica reports the same truth.
type serversCollector struct {
	st  *store.Store
	ttl time.Duration
	log *slog.Logger

	mu     sync.Mutex
	at     time.Time
	counts []store.ServerCount
}

// WatchServers registers the servers-by-state collector, which asks st
// at most once per ttl.
func (m *Metrics) WatchServers(st *store.Store, ttl time.Duration, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m.reg.MustRegister(&serversCollector{st: st, ttl: ttl, log: log})
}

func (c *serversCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- serversDesc
	ch <- warmDesc
	ch <- unhealthyDesc
}

func (c *serversCollector) Collect(ch chan<- prometheus.Metric) {
	counts, ok := c.read()
	if !ok {
		return
	}
	by := map[string]float64{}
	var warm, unhealthy float64
	for _, n := range counts {
		by[n.Status] = float64(n.Total)
		unhealthy += float64(n.Unhealthy)
		if n.Status == "RUNNING" {
			warm = float64(n.Warm)
		}
	}
	for _, s := range serverStates {
		ch <- prometheus.MustNewConstMetric(serversDesc, prometheus.GaugeValue, by[s], s)
	}
	ch <- prometheus.MustNewConstMetric(warmDesc, prometheus.GaugeValue, warm)
	ch <- prometheus.MustNewConstMetric(unhealthyDesc, prometheus.GaugeValue, unhealthy)
}

// read returns the cached counts, asking the database when they are
// older than ttl; a failed read leaves the series out of this scrape.
func (c *serversCollector) read() ([]store.ServerCount, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts != nil && time.Since(c.at) < c.ttl {
		return c.counts, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.st.ServerCounts(ctx)
	if err != nil {
		c.log.Warn("metrics: count servers", "err", err)
		return nil, false
	}
	if counts == nil {
		counts = []store.ServerCount{}
	}
	c.counts, c.at = counts, time.Now()
	return counts, true
}

// poolCollector reports pgxpool's Stat.
type poolCollector struct {
	pool *pgxpool.Pool
}

var (
	poolAcquired = prometheus.NewDesc("berth_db_pool_acquired_connections", "Database connections in use.", nil, nil)
	poolIdle     = prometheus.NewDesc("berth_db_pool_idle_connections", "Idle database connections.", nil, nil)
	poolTotal    = prometheus.NewDesc("berth_db_pool_connections", "Database connections open.", nil, nil)
	poolMax      = prometheus.NewDesc("berth_db_pool_max_connections", "Most database connections the pool opens.", nil, nil)
	poolAcquires = prometheus.NewDesc("berth_db_pool_acquires_total", "Connections taken from the pool.", nil, nil)
	poolEmpty    = prometheus.NewDesc("berth_db_pool_empty_acquires_total", "Acquires that found no idle connection and waited or dialed.", nil, nil)
	poolCanceled = prometheus.NewDesc("berth_db_pool_canceled_acquires_total", "Acquires given up because their context ended.", nil, nil)
	poolWait     = prometheus.NewDesc("berth_db_pool_acquire_seconds_total", "Time spent acquiring connections, in all.", nil, nil)
)

// WatchPool registers the database pool's statistics.
func (m *Metrics) WatchPool(pool *pgxpool.Pool) { m.reg.MustRegister(poolCollector{pool: pool}) }

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolAcquired, poolIdle, poolTotal, poolMax, poolAcquires, poolEmpty, poolCanceled, poolWait} {
		ch <- d
	}
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(poolAcquired, float64(s.AcquiredConns()))
	gauge(poolIdle, float64(s.IdleConns()))
	gauge(poolTotal, float64(s.TotalConns()))
	gauge(poolMax, float64(s.MaxConns()))
	counter(poolAcquires, float64(s.AcquireCount()))
	counter(poolEmpty, float64(s.EmptyAcquireCount()))
	counter(poolCanceled, float64(s.CanceledAcquireCount()))
	counter(poolWait, s.AcquireDuration().Seconds())
}

var (
	diskFreeDesc = prometheus.NewDesc("berth_data_dir_free_bytes",
		"Free space of this replica's data directory, where the local runtime allocates sandboxes' volumes.", nil, nil)
	diskReserveDesc = prometheus.NewDesc("berth_data_dir_reserve_bytes",
		"Space the local runtime keeps free in its data directory for berth and the sandboxes it runs (--data-dir-reserve).", nil, nil)
	diskLowDesc = prometheus.NewDesc("berth_data_dir_low",
		"1 when the data directory's free space is below its reserve: new sandboxes are refused until space is freed.", nil, nil)
)

// spaceCollector reads the runtime's free space when scraped: a statfs,
// this replica's own.
type spaceCollector struct {
	r   runtime.SpaceReporter
	log *slog.Logger
}

// WatchSpace registers the data directory's free space gauges.
func (m *Metrics) WatchSpace(r runtime.SpaceReporter, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m.reg.MustRegister(spaceCollector{r: r, log: log})
}

func (c spaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- diskFreeDesc
	ch <- diskReserveDesc
	ch <- diskLowDesc
}

func (c spaceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sp, err := c.r.Space(ctx)
	if err != nil {
		c.log.Warn("metrics: data directory free space", "err", err)
		return
	}
	low := 0.0
	if sp.Low {
		low = 1
	}
	ch <- prometheus.MustNewConstMetric(diskFreeDesc, prometheus.GaugeValue, float64(sp.FreeBytes))
	ch <- prometheus.MustNewConstMetric(diskReserveDesc, prometheus.GaugeValue, float64(sp.ReserveBytes))
	ch <- prometheus.MustNewConstMetric(diskLowDesc, prometheus.GaugeValue, low)
}
