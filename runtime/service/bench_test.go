package service_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
	"github.com/aidgen/aid/runtime/internal/rusage"
	"github.com/aidgen/aid/runtime/service"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

var loadDuration = flag.Duration("load.duration", 5*time.Second, "duration of BenchmarkLoad's attack")

// upstreamCompletion is the mock provider's answer.
const upstreamCompletion = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-bench-1",` +
	`"choices":[{"index":0,"finish_reason":"stop","logprobs":null,"message":{"role":"assistant","content":"Paris","refusal":null}}],` +
	`"usage":{"prompt_tokens":20,"completion_tokens":1,"total_tokens":21}}`

const benchBody = `{"model":"bench","messages":[{"role":"user","content":"What is the capital of France?"}]}`

// benchBodies are the chat completions the CPU benchmarks send: through the
// agent, and the same conversation straight to the exposed alias.
var benchBodies = map[string]string{
	"agent": benchBody,
	// The same agent with a pattern guardrail on its input (the
	// prompt-injection phrasings, benchGuardrails).
	"agent-guardrail": strings.Replace(benchBody, `"model":"bench"`, `"model":"bench-guarded"`, 1),
	// The same agent with a CEL guardrail on its input and a pattern
	// guardrail redacting card numbers in its output.
	"agent-guardrails": strings.Replace(benchBody, `"model":"bench"`, `"model":"bench-guardrails"`, 1),
	"alias":            `{"model":"small","messages":[{"role":"system","content":"Answer with the city only."},{"role":"user","content":"What is the capital of France?"}]}`,
}

// benchStack is a service in front of an openai-compatible mock upstream
// with no latency, both on loopback.
type benchStack struct {
	upstream, svc *httptest.Server
	client        *http.Client
}

func newBenchStack(b *testing.B) benchStack {
	b.Helper()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, upstreamCompletion)
	}))
	b.Cleanup(upstream.Close)
	transport := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	b.Cleanup(transport.CloseIdleConnections)
	front := httptest.NewServer(newBenchService(b, &http.Client{Transport: transport}, upstream.URL))
	b.Cleanup(front.Close)
	ct := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	b.Cleanup(ct.CloseIdleConnections)
	return benchStack{upstream: upstream, svc: front, client: &http.Client{Transport: ct}}
}

// newBenchService is the service of the benchmarks: one agent without
// tools, on an openai-compatible provider at baseURL reached through hc,
// charging a global budget, logging a line per request as in production.
func newBenchService(b *testing.B, hc *http.Client, baseURL string) *service.Service {
	return newBenchServiceOn(b, hc, baseURL, false)
}

// newBenchServiceOn is newBenchService, with tenancy: the token is a
// declared key of a tenant, and every call is counted against a tenant's
// daily budget, the key's hourly one and a per-key rate limit, as in an
// app with many callers (what those add is agent-keys over agent).
func newBenchServiceOn(b *testing.B, hc *http.Client, baseURL string, tenancy bool) *service.Service {
	b.Helper()
	p, err := openaicompat.New(openaicompat.Config{BaseURL: baseURL, HTTPClient: hc})
	if err != nil {
		b.Fatal(err)
	}
	return newBenchServiceWith(b, service.InstrumentProvider(p), tenancy)
}

// newBenchServiceWith is newBenchService on provider p.
func newBenchServiceWith(b *testing.B, p gateway.Provider, tenancy ...bool) *service.Service {
	b.Helper()
	budgets := []gateway.Budget{{Name: "bench", MaxUSD: 1e9, Scope: gateway.ScopeGlobal}}
	var limits []gateway.RateLimit
	auth := service.Auth{Kind: service.AuthBearer, Tokens: []string{token}}
	if len(tenancy) > 0 && tenancy[0] {
		budgets = append(budgets,
			gateway.Budget{Name: "tenant-daily", MaxUSD: 1e9, Scope: gateway.ScopeTenant, Window: "day", AppliesToAll: true},
			gateway.Budget{Name: "key-hourly", MaxUSD: 1e9, Scope: gateway.ScopeKey, Window: "1h", AppliesToAll: true})
		limits = []gateway.RateLimit{{Name: "per-key", Scope: gateway.RateScopeKey, RequestsPerMinute: 1e12, TokensPerMinute: 1e15}}
		auth = service.Auth{Kind: service.AuthBearer, Keys: []service.Key{{Name: "bench", Roles: []service.Role{service.RoleCaller}, Tenant: "acme", Secret: token}}}
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{
			ID: "gpt-bench-1", Provider: "openai", ContextWindow: 128000, MaxOutputTokens: 50,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.00015, OutputPer1kUSD: 0.0006},
		}}},
		Providers:  map[string]gateway.Provider{"openai": p},
		Budgets:    budgets,
		RateLimits: limits,
	})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := agents.New(agents.Config{Gateway: gw, Budgets: []gateway.Budget{{Name: "bench", MaxUSD: 1e9, Scope: gateway.ScopeGlobal}},
		Agents: []agents.Agent{
			{Name: "bench", Model: "small", Instructions: "Answer with the city only.", Budget: "bench"},
			{Name: "bench-guarded", Model: "small", Instructions: "Answer with the city only.", Budget: "bench", Guardrails: []string{"injection"}},
			{Name: "bench-guardrails", Model: "small", Instructions: "Answer with the city only.", Budget: "bench", Guardrails: []string{"too-long", "cards"}},
		},
		Guardrails: benchGuardrails, Conditions: cel.Language{},
	})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := service.New(service.Config{
		Gateway: gw, Agents: rt, Auth: auth,
		Aliases: []service.Alias{{Name: "small"}}, AliasBudget: "bench",
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), // a log line per request, as in production
	})
	if err != nil {
		b.Fatal(err)
	}
	return svc
}

// benchGuardrails are the guardrails of the bench-guarded and
// bench-guardrails agents: what a pattern input guardrail adds to a
// request is agent-guardrail's time over agent's; what a CEL input
// guardrail and a pattern output guardrail add, agent-guardrails'.
var benchGuardrails = []guard.Guardrail{
	{Name: "injection", Kind: guard.KindPattern, Points: []guard.Point{guard.Input}, Action: guard.Block, Message: "no", Builtins: []string{"injection"}},
	{Name: "too-long", Kind: guard.KindCEL, Points: []guard.Point{guard.Input}, Action: guard.Block, Message: "too long",
		When: `size(text) > 4000 || text.contains("system prompt")`},
	{Name: "cards", Kind: guard.KindPattern, Points: []guard.Point{guard.Output}, Action: guard.Redact, Builtins: []string{"card"}},
}

// post sends benchBody and returns how long the answer took.
func (s benchStack) post(b *testing.B, url string, auth bool) time.Duration {
	return s.postBody(b, url, benchBody, auth)
}

// postBody sends body and returns how long the answer took.
func (s benchStack) postBody(b *testing.B, url, body string, auth bool) time.Duration {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if err != nil || resp.StatusCode != 200 || !bytes.Contains(answer, []byte(`"Paris"`)) {
		b.Fatalf("%s: %d %s %v", url, resp.StatusCode, answer, err)
	}
	return d
}

// BenchmarkAddedLatency sends the same chat completion, in turn, straight to
// the mock upstream and through the service (auth, decoding, the agent run,
// the gateway with its budget and ledger, the openai-compatible adapter, the
// log line and the metrics), and reports the median and p99 of the
// difference per pair.
func BenchmarkAddedLatency(b *testing.B) {
	s := newBenchStack(b)
	for range 200 { // warm connections and caches
		s.post(b, s.upstream.URL+"/chat/completions", false)
		s.post(b, s.svc.URL+"/v1/chat/completions", true)
	}
	var diffs []float64
	for b.Loop() {
		direct := s.post(b, s.upstream.URL+"/chat/completions", false)
		through := s.post(b, s.svc.URL+"/v1/chat/completions", true)
		diffs = append(diffs, float64(through-direct)/float64(time.Millisecond))
	}
	slices.Sort(diffs)
	b.ReportMetric(quantile(diffs, 0.5), "p50-added-ms")
	b.ReportMetric(quantile(diffs, 0.99), "p99-added-ms")
}

// BenchmarkServiceCPU measures the CPU the service spends per chat
// completion through an agent without tools, in process. Each iteration
// sends 50 requests straight to the zero-latency mock upstream, then the
// same 50 through the service (which calls the same upstream through the
// openai-compatible adapter), and reads the process's CPU time (getrusage:
// user and system, every goroutine and the garbage collector) around each
// block. The direct block costs the benchmark's client and the mock; the
// service block costs them and the service, so the difference per request
// is the service's server side, its handler and its own client of the
// upstream. Profile it with -cpuprofile: the mock and the benchmark's
// client are in the profile too, under net/http's client and the
// upstream's handler.
func BenchmarkServiceCPU(b *testing.B) {
	for _, kind := range []string{"agent", "alias"} {
		b.Run(kind, func(b *testing.B) { benchServiceCPU(b, benchBodies[kind]) })
	}
}

func benchServiceCPU(b *testing.B, body string) {
	const block = 50
	s := newBenchStack(b)
	for range 500 { // warm connections and caches
		s.post(b, s.upstream.URL+"/chat/completions", false)
		s.postBody(b, s.svc.URL+"/v1/chat/completions", body, true)
	}
	type cost struct {
		cpu            time.Duration
		allocs, nbytes uint64
	}
	var ms runtime.MemStats
	measure := func(url, body string, auth bool, c *cost) {
		runtime.ReadMemStats(&ms)
		allocs, nbytes := ms.Mallocs, ms.TotalAlloc
		before := cpuTime(b)
		for range block {
			s.postBody(b, url, body, auth)
		}
		c.cpu += cpuTime(b) - before
		runtime.ReadMemStats(&ms)
		c.allocs += ms.Mallocs - allocs
		c.nbytes += ms.TotalAlloc - nbytes
	}
	var direct, through cost
	n := 0
	for b.Loop() {
		measure(s.upstream.URL+"/chat/completions", benchBody, false, &direct)
		measure(s.svc.URL+"/v1/chat/completions", body, true, &through)
		n += block
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e3 }
	b.ReportMetric(us(direct.cpu), "direct-cpu-µs/req")
	b.ReportMetric(us(through.cpu), "through-cpu-µs/req")
	b.ReportMetric(us(through.cpu-direct.cpu), "service-cpu-µs/req")
	b.ReportMetric(float64(through.allocs-direct.allocs)/float64(n), "service-allocs/req")
	b.ReportMetric(float64(through.nbytes-direct.nbytes)/float64(n), "service-B/req")
}

// cpuTime returns the process's user and system CPU time.
func cpuTime(b *testing.B) time.Duration {
	d, err := rusage.CPU()
	if err != nil {
		b.Skipf("getrusage: %v", err)
	}
	return d
}

// cannedUpstream answers every request with upstreamCompletion, in
// memory: the upstream of BenchmarkHandler, which costs next to nothing.
type cannedUpstream struct{}

func (cannedUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(strings.NewReader(upstreamCompletion)),
		Request: r, ContentLength: int64(len(upstreamCompletion)),
	}, nil
}

// BenchmarkHandler is the service's own work on a chat completion through
// an agent without tools, without the network: the request is handed to
// the handler in memory and the openai-compatible adapter's HTTP client
// answers from memory. What it reports is the handler (auth, decoding, the
// run and its records, the gateway and its ledger, the adapter's encoding
// and decoding, the answer, the log line and the metrics); the HTTP server
// and the sockets come on top (BenchmarkServiceCPU).
func BenchmarkHandler(b *testing.B) {
	for _, kind := range []string{"agent", "agent-guardrail", "agent-guardrails", "alias"} {
		b.Run(kind, func(b *testing.B) { benchHandler(b, "/v1/chat/completions", benchBodies[kind]) })
	}
	// The agent through a key of a tenant, with the tenant's and the key's
	// windowed budgets and a rate limit: what many callers add.
	b.Run("agent-keys", func(b *testing.B) {
		benchHandlerOn(b, newBenchServiceOn(b, &http.Client{Transport: cannedUpstream{}}, "http://upstream.invalid/v1", true), "/v1/chat/completions", benchBodies["agent"])
	})
	// The same agent and question through the Responses API, to compare
	// with "agent" (benchstat).
	b.Run("agent-responses", func(b *testing.B) {
		benchHandler(b, "/v1/responses", `{"model":"bench","input":"What is the capital of France?"}`)
	})
}

func benchHandler(b *testing.B, path, payload string) {
	benchHandlerOn(b, newBenchService(b, &http.Client{Transport: cannedUpstream{}}, "http://upstream.invalid/v1"), path, payload)
}

func benchHandlerOn(b *testing.B, h http.Handler, path, payload string) {
	body := []byte(payload)
	b.ReportAllocs()
	start := cpuTime(b)
	for b.Loop() {
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
	// On a shared machine the wall time per operation says how often the
	// process ran; its CPU time says what the handler costs.
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N)/1e3, "cpu-µs/op")
}

// quantile reads a quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

// BenchmarkLoad attacks the service for -load.duration (default 5s) with
// vegeta at the highest rate 16 workers sustain, on loopback, with a
// zero-latency upstream; run it once: -bench Load -benchtime 1x. It reports
// the throughput, the errors, the end-to-end p50/p99 (an upper bound of the
// added latency: the upstream answers at once, but its HTTP hop is counted)
// and the p50/p99 of the service's own added latency, read from its
// aid_service_added_latency_seconds histogram.
func BenchmarkLoad(b *testing.B) {
	s := newBenchStack(b)
	hdr := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
	targeter := vegeta.NewStaticTargeter(vegeta.Target{Method: "POST", URL: s.svc.URL + "/v1/chat/completions", Body: []byte(benchBody), Header: hdr})
	for b.Loop() {
		attacker := vegeta.NewAttacker(vegeta.Workers(16), vegeta.MaxWorkers(16), vegeta.KeepAlive(true), vegeta.Connections(64), vegeta.Timeout(10*time.Second))
		var m vegeta.Metrics
		for res := range attacker.Attack(targeter, vegeta.Rate{Freq: 0}, *loadDuration, "load") {
			m.Add(res)
		}
		m.Close()
		b.ReportMetric(m.Throughput, "qps")
		b.ReportMetric(float64(m.Requests)*(1-m.Success), "errors")
		b.ReportMetric(float64(m.Latencies.P50)/1e6, "e2e-p50-ms")
		b.ReportMetric(float64(m.Latencies.P99)/1e6, "e2e-p99-ms")
		if len(m.Errors) > 0 {
			b.Logf("errors: %v", m.Errors)
		}
	}
	p50, p99 := addedQuantiles(b, s)
	b.ReportMetric(p50, "added-p50-ms")
	b.ReportMetric(p99, "added-p99-ms")
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		b.Logf("load average after the run: %s", strings.TrimSpace(string(load)))
	}
}

// addedQuantiles estimates quantiles of the added-latency histogram by
// linear interpolation within buckets, as PromQL's histogram_quantile does.
func addedQuantiles(b *testing.B, s benchStack) (p50, p99 float64) {
	req, _ := http.NewRequest("GET", s.svc.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := s.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	type bucket struct{ le, count float64 }
	var buckets []bucket
	prefix := `aid_service_added_latency_seconds_bucket{agent="bench",route="POST /v1/chat/completions",le="`
	for _, l := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(l, prefix)
		if !ok {
			continue
		}
		le, val, _ := strings.Cut(rest, `"} `)
		var bk bucket
		if le == "+Inf" {
			bk.le = math.Inf(1)
		} else if _, err := fmt.Sscan(le, &bk.le); err != nil {
			b.Fatal(err)
		}
		if _, err := fmt.Sscan(val, &bk.count); err != nil {
			b.Fatal(err)
		}
		buckets = append(buckets, bk)
	}
	q := func(q float64) float64 {
		total := buckets[len(buckets)-1].count
		rank := q * total
		lo, prev := 0.0, 0.0
		for _, bk := range buckets {
			if bk.count >= rank {
				if math.IsInf(bk.le, 1) {
					return lo * 1000
				}
				return (lo + (bk.le-lo)*(rank-prev)/(bk.count-prev)) * 1000
			}
			lo, prev = bk.le, bk.count
		}
		return math.NaN()
	}
	return q(0.5), q(0.99)
}
