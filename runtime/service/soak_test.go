package service_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/service"
)

var (
	soakRequests = flag.Int("soak.requests", 200_000, "requests BenchmarkSoak serves")
	soakWindow   = flag.Int("soak.window", 10_000, "requests in each of BenchmarkSoak's measured windows")
	soakWorkers  = flag.Int("soak.workers", 4, "concurrent clients of BenchmarkSoak")
)

const soakBody = `{"model":"soak","messages":[{"role":"user","content":"What is the capital of France?"}]}`

// BenchmarkSoak serves -soak.requests chat completions (default 200,000)
// through the service's HTTP handler on loopback, from -soak.workers
// clients, to an agent answering through the keyless fake provider and
// charging a run-scoped and a global budget, with an in-memory run store
// and ledger at their default bounds: the long-lived memory-state service.
// It reports the resident set (VmRSS of /proc/self/status), the live heap
// after a collection, and the p99 latency of a window of -soak.window
// requests at the start (after the first window, which fills the run
// store to its bound) and at the end. Run it once: -bench Soak -benchtime 1x.
func BenchmarkSoak(b *testing.B) {
	budgets := []gateway.Budget{
		{Name: "per-run", MaxUSD: 1, Scope: gateway.ScopeRun},
		{Name: "org", MaxUSD: 1e9, Scope: gateway.ScopeGlobal},
	}
	p, err := fake.New(fake.Config{Agents: map[string][]fake.Step{"soak": {{Text: "Paris"}}}, Loop: true})
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{
			ID: "fake-small-1", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 50,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.00015, OutputPer1kUSD: 0.0006},
		}}},
		Providers: map[string]gateway.Provider{"fake": service.InstrumentProvider(p)},
		Budgets:   budgets,
	})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := agents.New(agents.Config{Gateway: gw, Budgets: budgets,
		Agents: []agents.Agent{{Name: "soak", Model: "small", Instructions: "Answer with the city only.", Budget: "per-run"}}})
	if err != nil {
		b.Fatal(err)
	}
	svc, err := service.New(service.Config{
		Gateway: gw, Agents: rt, Auth: service.Auth{Kind: service.AuthBearer, Tokens: []string{token}},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	b.Cleanup(srv.Close)
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	url := srv.URL + "/v1/chat/completions"
	post := func() time.Duration {
		req, _ := http.NewRequest("POST", url, strings.NewReader(soakBody))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err != nil || resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"Paris"`)) {
			b.Fatalf("%d %s %v", resp.StatusCode, body, err)
		}
		return d
	}
	// serve sends n requests from the workers and returns their latencies.
	serve := func(n int) []float64 {
		lat := make([]float64, n)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range *soakWorkers {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					lat[i] = float64(post()) / float64(time.Millisecond)
				}
			})
		}
		wg.Wait()
		slices.Sort(lat)
		return lat
	}
	total, window := *soakRequests, *soakWindow
	if window*2 > total {
		b.Fatalf("-soak.requests %d must be at least two windows of %d", total, window)
	}
	for b.Loop() {
		start := time.Now()
		first := serve(window)
		startRSS, startHeap := rssMiB(b), liveHeapMiB()
		served := window
		// The resident set over time, a point per window: bounded means
		// it levels off once the run store holds its bound.
		series := []string{fmt.Sprintf("%dk:%.0f", served/1000, startRSS)}
		for served < total-window {
			n := min(window, total-window-served)
			serve(n)
			served += n
			series = append(series, fmt.Sprintf("%dk:%.0f", served/1000, rssMiB(b)))
		}
		last := serve(window)
		endRSS, endHeap := rssMiB(b), liveHeapMiB()
		series = append(series, fmt.Sprintf("%dk:%.0f", total/1000, endRSS))
		b.Logf("%d requests in %v; RSS MiB after each window: %s", total, time.Since(start).Round(time.Millisecond), strings.Join(series, " "))
		b.ReportMetric(startRSS, "start-rss-MiB")
		b.ReportMetric(endRSS, "end-rss-MiB")
		b.ReportMetric(startHeap, "start-heap-MiB")
		b.ReportMetric(endHeap, "end-heap-MiB")
		b.ReportMetric(quantile(first, 0.99), "start-p99-ms")
		b.ReportMetric(quantile(last, 0.99), "end-p99-ms")
		b.ReportMetric(endRSS/startRSS, "rss-end/start")
		b.ReportMetric(quantile(last, 0.99)/quantile(first, 0.99), "p99-end/start")
	}
}

// rssMiB reads the process's resident set from /proc/self/status.
func rssMiB(b *testing.B) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// liveHeapMiB collects garbage and returns the bytes of live heap objects.
func liveHeapMiB() float64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return float64(s[0].Value.Uint64()) / (1 << 20)
}
