package service

import (
	"context"
	"strconv"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the service's series, in a registry of its own.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	added    *prometheus.HistogramVec
	runs     *prometheus.CounterVec
	aliases  *prometheus.CounterVec
	// decisions counts approvals and rejections by the key that made
	// them: who approved is the key, never a name in a body.
	decisions *prometheus.CounterVec
	verdicts  *prometheus.CounterVec
	guardCost *prometheus.CounterVec
}

// latencyBuckets reach from 100µs, where the service's own added latency
// lives, to two minutes, where long runs do.
var latencyBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

func newMetrics(reg *prometheus.Registry, gw *gateway.Gateway) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aid_http_requests_total",
			Help: "HTTP requests by route pattern, agent (the agent asked for, or the run's entry agent; empty when none), final agent (the agent the run ended on, after handoffs; empty when none) and status code.",
		}, []string{"route", "agent", "final_agent", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "aid_http_request_duration_seconds", Buckets: latencyBuckets,
			Help: "Time to answer a request, by route pattern and agent (the agent asked for, or the run's entry agent).",
		}, []string{"route", "agent"}),
		added: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "aid_service_added_latency_seconds", Buckets: latencyBuckets,
			Help: "The service's own latency: a request's duration minus the time it waited on instrumented providers, tools and searchers.",
		}, []string{"route", "agent"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aid_runs_total",
			Help: "Runs started, resumed or continued through the service, by agent (the run's entry agent, the one asked for), final agent (the agent it ended on, after handoffs) and status.",
		}, []string{"agent", "final_agent", "status"}),
	}
	m.aliases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aid_alias_requests_total",
		Help: "Chat completions answered directly by an exposed alias, by the alias asked for and status code.",
	}, []string{"alias", "code"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aid_decisions_total",
		Help: "Decisions on paused runs' calls, by the API key that made them (empty without authentication) and action (approve or reject).",
	}, []string{"key", "action"})
	m.verdicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aid_guardrail_verdicts_total",
		Help: "Verdicts of guardrails and hooks that did something, by the run's entry agent, guardrail, point (input, toolArguments, toolResult, output, modelCall, handoff) and action (block, redact, ask, log, or pass for a model guardrail's call that found nothing).",
	}, []string{"agent", "guardrail", "point", "action"})
	m.guardCost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aid_guardrail_cost_usd_total",
		Help: "What judging cost, in US dollars, by the run's entry agent and guardrail: model guardrails' calls, also counted in the runs' cost.",
	}, []string{"agent", "guardrail"})
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.added, m.runs, m.aliases, m.decisions, m.verdicts, m.guardCost, spendCollector{gw}, deploymentCollector{gw}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// request records a request; agent is the agent asked for, final the one
// its run ended on.
func (m *metrics) request(route, agent, final string, status int, total, added time.Duration) {
	m.requests.WithLabelValues(route, agent, final, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route, agent).Observe(total.Seconds())
	if added < 0 {
		added = 0
	}
	m.added.WithLabelValues(route, agent).Observe(added.Seconds())
}

func (m *metrics) aliasRequest(alias string, status int) {
	m.aliases.WithLabelValues(alias, strconv.Itoa(status)).Inc()
}

// run records a run's end; agent is its entry agent, final the one it
// ended on.
func (m *metrics) run(agent, final string, res agents.RunResult) {
	m.runs.WithLabelValues(agent, final, string(res.Status)).Inc()
	for _, v := range res.Verdicts {
		action := string(v.Action)
		if v.Action == agents.HookPass {
			action = "pass"
		}
		m.verdicts.WithLabelValues(agent, v.Guardrail, string(v.Point), action).Inc()
		if v.CostUSD > 0 {
			m.guardCost.WithLabelValues(agent, v.Guardrail).Add(v.CostUSD)
		}
	}
}

// decision records a decision the runtime took.
func (m *metrics) decision(key string, action agents.DecisionAction) {
	m.decisions.WithLabelValues(key, string(action)).Inc()
}

// spendCollector reports the gateway ledger's settled spend by budget and
// scope at scrape time, summed over scope keys: one series per budget rather
// than one per run or thread.
type spendCollector struct{ gw *gateway.Gateway }

var (
	spendUSDDesc = prometheus.NewDesc("aid_budget_spent_usd",
		"Settled spend in US dollars by budget and scope, summed over scope keys.", []string{"budget", "scope"}, nil)
	spendTokensDesc = prometheus.NewDesc("aid_budget_spent_tokens",
		"Settled tokens by budget and scope, summed over scope keys.", []string{"budget", "scope"}, nil)
	spendCallsDesc = prometheus.NewDesc("aid_budget_calls",
		"Settled calls by budget and scope, summed over scope keys.", []string{"budget", "scope"}, nil)
	ledgerUpDesc = prometheus.NewDesc("aid_ledger_up",
		"1 when the last scrape could read the ledger's spend, 0 otherwise.", nil, nil)
)

func (c spendCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- spendUSDDesc
	ch <- spendTokensDesc
	ch <- spendCallsDesc
	ch <- ledgerUpDesc
}

func (c spendCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Spend by budget costs the number of budgets, not of the runs and
	// threads ever charged.
	spend, err := c.gw.SpendByBudget(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(ledgerUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(ledgerUpDesc, prometheus.GaugeValue, 1)
	for _, b := range spend {
		scope := string(b.Scope)
		ch <- prometheus.MustNewConstMetric(spendUSDDesc, prometheus.CounterValue, b.Spent.USD(), b.Budget, scope)
		ch <- prometheus.MustNewConstMetric(spendTokensDesc, prometheus.CounterValue, float64(b.Spent.Tokens), b.Budget, scope)
		ch <- prometheus.MustNewConstMetric(spendCallsDesc, prometheus.CounterValue, float64(b.Calls), b.Budget, scope)
	}
}

// deploymentCollector reports each alias deployment's load and health at
// scrape time, from the gateway's counters.
type deploymentCollector struct{ gw *gateway.Gateway }

var (
	deploymentLabels        = []string{"alias", "model", "deployment", "provider"}
	deploymentCallsDesc     = prometheus.NewDesc("aid_deployment_calls_total", "Calls sent to a deployment of an alias.", deploymentLabels, nil)
	deploymentFailuresDesc  = prometheus.NewDesc("aid_deployment_failures_total", "Calls to a deployment that failed in a way that cools it down (5xx, 429, timeouts, broken connections).", deploymentLabels, nil)
	deploymentCoolDownsDesc = prometheus.NewDesc("aid_deployment_cooldowns_total", "Times a deployment was cooled down.", deploymentLabels, nil)
	deploymentInFlightDesc  = prometheus.NewDesc("aid_deployment_in_flight", "Calls a deployment serves now.", deploymentLabels, nil)
	deploymentCoolingDesc   = prometheus.NewDesc("aid_deployment_cooling", "1 while a deployment is cooling down and takes no calls, 0 otherwise.", deploymentLabels, nil)
)

func (c deploymentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{deploymentCallsDesc, deploymentFailuresDesc, deploymentCoolDownsDesc, deploymentInFlightDesc, deploymentCoolingDesc} {
		ch <- d
	}
}

func (c deploymentCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.gw.Deployments() {
		l := []string{d.Alias, d.Model, d.Name, d.Provider}
		cooling := 0.0
		if !d.CoolingUntil.IsZero() {
			cooling = 1
		}
		ch <- prometheus.MustNewConstMetric(deploymentCallsDesc, prometheus.CounterValue, float64(d.Calls), l...)
		ch <- prometheus.MustNewConstMetric(deploymentFailuresDesc, prometheus.CounterValue, float64(d.Failures), l...)
		ch <- prometheus.MustNewConstMetric(deploymentCoolDownsDesc, prometheus.CounterValue, float64(d.CoolDowns), l...)
		ch <- prometheus.MustNewConstMetric(deploymentInFlightDesc, prometheus.GaugeValue, float64(d.InFlight), l...)
		ch <- prometheus.MustNewConstMetric(deploymentCoolingDesc, prometheus.GaugeValue, cooling, l...)
	}
}
