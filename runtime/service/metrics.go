package service

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
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
	// tenantRequests counts the requests of keys by their tenant: a
	// tenant is a key's, declared or created by an admin, never a value a
	// request carries, so the series are bounded by the keys.
	tenantRequests *prometheus.CounterVec
	guardCost      *prometheus.CounterVec
	guardTokens    *prometheus.CounterVec
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
		Help: "Decisions on paused runs' calls, by the tenant and name of the API key that made them (empty without authentication) and action (approve or reject).",
	}, []string{"tenant", "key", "action"})
	m.tenantRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aid_tenant_requests_total",
		Help: "Requests an API key made, by the key's tenant (empty for a key of no tenant), route pattern and status code.",
	}, []string{"tenant", "route", "code"})
	m.verdicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aid_guardrail_verdicts_total",
		Help: "Verdicts of guardrails and hooks that did something, by the run's entry agent, guardrail, point (input, toolArguments, toolResult, output, modelCall, handoff) and action (block, redact, ask, log, or pass for a model guardrail's call that found nothing).",
	}, []string{"agent", "guardrail", "point", "action"})
	m.guardCost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aid_guardrail_cost_usd_total",
		Help: "What judging cost, in US dollars, by the run's entry agent and guardrail: model guardrails' calls, also counted in the runs' cost.",
	}, []string{"agent", "guardrail"})
	m.guardTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aid_guardrail_tokens_total",
		Help: "Tokens judging read and wrote, by the run's entry agent, guardrail and direction (input, output): model guardrails' calls and their agents' runs, also counted in the runs' usage.",
	}, []string{"agent", "guardrail", "direction"})
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.added, m.runs, m.aliases, m.decisions, m.verdicts, m.guardCost, m.guardTokens, m.tenantRequests, spendCollector{gw}, deploymentCollector{gw}, tenantCollector{gw}} {
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
		if u := v.Usage; u != nil {
			m.guardTokens.WithLabelValues(agent, v.Guardrail, "input").Add(float64(u.InputTokens))
			m.guardTokens.WithLabelValues(agent, v.Guardrail, "output").Add(float64(u.OutputTokens))
		}
	}
}

// decision records a decision the runtime took, by the key p (nil
// without authentication) whose name the decision records as By.
func (m *metrics) decision(p *principal, by string, action agents.DecisionAction) {
	m.decisions.WithLabelValues(p.tenantName(), by, string(action)).Inc()
}

// tenantRequest records a request a key made.
func (m *metrics) tenantRequest(p *principal, route string, status int) {
	m.tenantRequests.WithLabelValues(p.tenant, route, strconv.Itoa(status)).Inc()
}

// tenantCollector reports, at scrape time, what each tenant's model calls
// settled through the gateway in this process: its spend, tokens and
// calls, labelled by tenant (TenantSpend: one series per tenant of a key).
type tenantCollector struct{ gw *gateway.Gateway }

var (
	tenantSpentDesc  = prometheus.NewDesc("aid_tenant_spent_usd_total", "Settled spend of model calls in US dollars, by the caller's tenant.", []string{"tenant"}, nil)
	tenantTokensDesc = prometheus.NewDesc("aid_tenant_tokens_total", "Settled tokens (input and output) of model calls, by the caller's tenant.", []string{"tenant"}, nil)
	tenantCallsDesc  = prometheus.NewDesc("aid_tenant_model_calls_total", "Settled model calls, by the caller's tenant.", []string{"tenant"}, nil)
)

func (c tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tenantSpentDesc
	ch <- tenantTokensDesc
	ch <- tenantCallsDesc
}

func (c tenantCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.gw.SpendByTenant() {
		ch <- prometheus.MustNewConstMetric(tenantSpentDesc, prometheus.CounterValue, t.Spent.USD(), t.Tenant)
		ch <- prometheus.MustNewConstMetric(tenantTokensDesc, prometheus.CounterValue, float64(t.Spent.Tokens), t.Tenant)
		ch <- prometheus.MustNewConstMetric(tenantCallsDesc, prometheus.CounterValue, float64(t.Calls), t.Tenant)
	}
}

// tenantGatherer is what /metrics shows a key bound to a tenant: the
// series labelled with its tenant, and, for a key of no tenant, the series
// of no tenant (the application's). Another tenant's series do not exist
// for it, as its runs do not.
type tenantGatherer struct {
	g      prometheus.Gatherer
	tenant string
}

func (t tenantGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := t.g.Gather()
	out := mfs[:0]
	for _, mf := range mfs {
		kept := mf.Metric[:0]
		for _, m := range mf.Metric {
			if seriesTenant(m) == t.tenant {
				kept = append(kept, m)
			}
		}
		if len(kept) > 0 {
			mf.Metric = kept
			out = append(out, mf)
		}
	}
	return out, err
}

// seriesTenant is the tenant label of a series, "" when it has none.
func seriesTenant(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "tenant" {
			return l.GetValue()
		}
	}
	return ""
}

// metricsHandler answers /metrics: every series to an admin key and
// without authentication, a tenant's own (tenantGatherer) to any other key.
func metricsHandler(reg prometheus.Gatherer) http.Handler {
	all := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		if p == nil || p.admin() {
			all.ServeHTTP(w, r)
			return
		}
		promhttp.HandlerFor(tenantGatherer{reg, p.tenant}, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
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
	spendCacheReadDesc = prometheus.NewDesc("aid_budget_spent_cache_read_tokens",
		"Settled prompt tokens read from a provider's prompt cache by budget and scope, summed over scope keys; a part of aid_budget_spent_tokens.", []string{"budget", "scope"}, nil)
	spendCacheWriteDesc = prometheus.NewDesc("aid_budget_spent_cache_write_tokens",
		"Settled prompt tokens written to a provider's prompt cache by budget and scope, summed over scope keys; a part of aid_budget_spent_tokens.", []string{"budget", "scope"}, nil)
	spendCallsDesc = prometheus.NewDesc("aid_budget_calls",
		"Settled calls by budget and scope, summed over scope keys.", []string{"budget", "scope"}, nil)
	ledgerUpDesc = prometheus.NewDesc("aid_ledger_up",
		"1 when the last scrape could read the ledger's spend, 0 otherwise.", nil, nil)
)

func (c spendCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- spendUSDDesc
	ch <- spendTokensDesc
	ch <- spendCacheReadDesc
	ch <- spendCacheWriteDesc
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
		ch <- prometheus.MustNewConstMetric(spendCacheReadDesc, prometheus.CounterValue, float64(b.Spent.CachedInputTokens), b.Budget, scope)
		ch <- prometheus.MustNewConstMetric(spendCacheWriteDesc, prometheus.CounterValue, float64(b.Spent.CacheWriteInputTokens), b.Budget, scope)
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
