package pgqueue

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
)

// metrics are the queue's series: depth at scrape time, and River's own
// statistics of the jobs this process worked.
type metrics struct {
	q       *Queue
	wait    *prometheus.HistogramVec
	run     *prometheus.HistogramVec
	jobs    *prometheus.CounterVec
	runs    *prometheus.CounterVec
	rescued prometheus.Counter
	refused prometheus.Counter
}

var (
	depthDesc   = prometheus.NewDesc("aid_jobs_waiting", "Jobs of background runs waiting for a worker (available, retryable or scheduled), by River queue, at scrape time.", []string{"queue"}, nil)
	depthUpDesc = prometheus.NewDesc("aid_jobs_depth_up", "1 when the scrape could count the waiting jobs, 0 otherwise.", nil, nil)
)

var jobBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

func newMetrics(reg prometheus.Registerer, q *Queue) (*metrics, error) {
	m := &metrics{
		q: q,
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "aid_job_queue_wait_seconds", Buckets: jobBuckets,
			Help: "Time a job of this process waited available before a worker took it (River's QueueWaitDuration), by kind.",
		}, []string{"kind"}),
		run: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "aid_job_run_seconds", Buckets: jobBuckets,
			Help: "Time a job of this process ran (River's RunDuration), by kind and outcome (completed, failed, cancelled).",
		}, []string{"kind", "outcome"}),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aid_jobs_total", Help: "Jobs this process finished working, by kind and outcome (completed, failed: retried, cancelled).",
		}, []string{"kind", "outcome"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aid_background_runs_total", Help: "Background runs this process's workers drove to a stop, by the status they stopped in.",
		}, []string{"status"}),
		rescued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aid_jobs_rescued_total", Help: "Jobs this process took over after they were taken from a worker presumed dead (its replica silent for DeadAfter, or the job older than RescueAfter).",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aid_jobs_refused_total", Help: "Background submissions refused because the queue held MaxQueued waiting runs (answered 429).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.wait, m.run, m.jobs, m.runs, m.rescued, m.refused, depthCollector{m}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// event records one of River's job events.
func (m *metrics) event(ev *river.Event) {
	if ev.Job == nil {
		return
	}
	outcome := map[river.EventKind]string{river.EventKindJobCompleted: "completed", river.EventKindJobFailed: "failed", river.EventKindJobCancelled: "cancelled"}[ev.Kind]
	m.jobs.WithLabelValues(ev.Job.Kind, outcome).Inc()
	if ev.JobStats != nil {
		m.wait.WithLabelValues(ev.Job.Kind).Observe(ev.JobStats.QueueWaitDuration.Seconds())
		m.run.WithLabelValues(ev.Job.Kind, outcome).Observe(ev.JobStats.RunDuration.Seconds())
	}
}

// depthCollector counts the waiting jobs per queue at scrape time.
type depthCollector struct{ m *metrics }

// Describe implements prometheus.Collector.
func (c depthCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- depthDesc
	ch <- depthUpDesc
}

// Collect implements prometheus.Collector.
func (c depthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := c.m.q.pool.Query(ctx, `SELECT queue, count(*) FROM river_job WHERE state IN ('available', 'retryable', 'scheduled') AND queue = ANY($1) GROUP BY queue`, c.m.q.queues)
	counts := map[string]int64{}
	if err == nil {
		for rows.Next() {
			var name string
			var n int64
			if err = rows.Scan(&name, &n); err != nil {
				break
			}
			counts[name] = n
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		ch <- prometheus.MustNewConstMetric(depthUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(depthUpDesc, prometheus.GaugeValue, 1)
	for _, name := range c.m.q.queues {
		ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(counts[name]), name)
	}
}
