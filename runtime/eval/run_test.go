package eval_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aidgen/aid/runtime/eval"
)

// seededRunner answers a case correctly with probability accuracy, deterministically in
// (seed, case id, sample), like the fake provider: the same inputs give the same answer
// whatever the scheduling.
func seededRunner(seed uint64, accuracy float64, jitter time.Duration) eval.Runner {
	return eval.RunnerFunc(func(ctx context.Context, c eval.Case, sample int) (eval.Answer, error) {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%s/%d", seed, c.ID, sample)
		r := rand.New(rand.NewPCG(h.Sum64(), seed))
		correct := r.Float64() < accuracy
		if jitter > 0 {
			select {
			case <-time.After(time.Duration(r.Int64N(int64(jitter)))):
			case <-ctx.Done():
				return eval.Answer{}, ctx.Err()
			}
		}
		text := "I am not sure."
		if correct {
			text = c.Expected
		}
		return eval.Answer{Text: text, Model: "fake-model-v1", CostUSD: 0.001, InputTokens: 10, OutputTokens: 3}, nil
	})
}

func TestRunDeterministicWhateverTheScheduling(t *testing.T) {
	ds := capitals(t)
	metrics := []eval.Metric{eval.ExactMatch{}, eval.NormalizedContains{}}
	serial, err := eval.Run(context.Background(), ds, seededRunner(0, 0.6, 0), metrics, eval.Options{Runs: 4, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	parallel, err := eval.Run(context.Background(), ds, seededRunner(0, 0.6, time.Millisecond), metrics, eval.Options{Runs: 4, Concurrency: 16})
	if err != nil {
		t.Fatal(err)
	}
	ignore := cmpopts.IgnoreFields(eval.Sample{}, "Latency")
	if diff := cmp.Diff(serial, parallel, ignore); diff != "" {
		t.Errorf("results depend on scheduling (-serial +parallel):\n%s", diff)
	}
	if len(serial.Cases) != len(ds.Cases) {
		t.Fatalf("%d case results for %d cases", len(serial.Cases), len(ds.Cases))
	}
	for i, cr := range serial.Cases {
		if cr.CaseID != ds.Cases[i].ID || len(cr.Samples) != 4 {
			t.Fatalf("case result %d is %s with %d samples", i, cr.CaseID, len(cr.Samples))
		}
		for k, s := range cr.Samples {
			if s.Index != k {
				t.Errorf("case %s sample %d has index %d", cr.CaseID, k, s.Index)
			}
		}
	}
	if want := 0.001 * float64(len(ds.Cases)*4); serial.CostUSD < want-1e-9 || serial.CostUSD > want+1e-9 {
		t.Errorf("cost %v, want %v", serial.CostUSD, want)
	}
	if serial.InputTokens != int64(10*len(ds.Cases)*4) || serial.OutputTokens != int64(3*len(ds.Cases)*4) {
		t.Errorf("tokens %d/%d", serial.InputTokens, serial.OutputTokens)
	}
	if !cmp.Equal(serial.Models, []string{"fake-model-v1"}) {
		t.Errorf("models %v", serial.Models)
	}
	if serial.Dataset != "capitals" || serial.DatasetVersion != ds.Version || serial.Runs != 4 {
		t.Errorf("header %s %s %d", serial.Dataset, serial.DatasetVersion, serial.Runs)
	}
	st, err := serial.Stats()
	if err != nil {
		t.Fatal(err)
	}
	em := st["exact_match"]
	if em.Runs != 4 || em.Cases != len(ds.Cases) || len(em.CaseMeans) != len(ds.Cases) || em.Mean < 0.4 || em.Mean > 0.8 {
		t.Errorf("exact_match stats %+v", em)
	}
	// A different seed is a different sample.
	other, err := eval.Run(context.Background(), ds, seededRunner(1, 0.6, 0), metrics, eval.Options{Runs: 4})
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Equal(serial, other, ignore) {
		t.Error("seeds 0 and 1 gave identical results")
	}
}

func TestRunBoundsConcurrencyAndReportsProgress(t *testing.T) {
	ds := capitals(t)
	var inFlight, peak atomic.Int64
	runner := eval.RunnerFunc(func(ctx context.Context, c eval.Case, sample int) (eval.Answer, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		return eval.Answer{Text: c.Expected}, nil
	})
	var calls []int
	total := 0
	_, err := eval.Run(context.Background(), ds, runner, []eval.Metric{eval.ExactMatch{}}, eval.Options{
		Runs: 3, Concurrency: 4,
		Progress: func(done, tot int) { calls = append(calls, done); total = tot }, // never concurrent
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p > 4 || p < 2 {
		t.Errorf("peak concurrency %d, want 2..4", p)
	}
	want := len(ds.Cases) * 3
	if total != want || len(calls) != want {
		t.Fatalf("progress called %d times with total %d, want %d", len(calls), total, want)
	}
	for i, d := range calls {
		if d != i+1 {
			t.Fatalf("progress call %d reported %d done", i, d)
		}
	}
}

// flakyMetric fails on one case and returns an out-of-range score on another.
type flakyMetric struct{}

func (flakyMetric) Name() string       { return "flaky" }
func (flakyMetric) ModelDerived() bool { return false }
func (flakyMetric) Score(_ context.Context, c eval.Case, _ string) (float64, error) {
	switch c.ID {
	case "de":
		return 0, errors.New("scorer crashed")
	case "it":
		return 1.5, nil
	}
	return 1, nil
}

func TestRunRecordsFailures(t *testing.T) {
	ds := capitals(t)
	timeout := errors.New("provider timeout")
	runner := eval.RunnerFunc(func(ctx context.Context, c eval.Case, sample int) (eval.Answer, error) {
		if c.ID == "fr" && sample == 1 {
			return eval.Answer{}, timeout
		}
		return eval.Answer{Text: c.Expected}, nil
	})
	res, err := eval.Run(context.Background(), ds, runner, []eval.Metric{eval.ExactMatch{}, flakyMetric{}}, eval.Options{Runs: 2, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	fr := res.Cases[0].Samples[1]
	var se *eval.SampleError
	if !errors.As(fr.Err, &se) || !errors.Is(fr.Err, timeout) || se.CaseID != "fr" || se.Sample != 1 {
		t.Fatalf("failed sample error %v", fr.Err)
	}
	if fr.Scores[0] != 0 || fr.Scores[1] != 0 {
		t.Errorf("failed sample scores %v, want zeros", fr.Scores)
	}
	errs := res.Errors()
	// fr/1 runner failure; de and it fail the flaky metric on both samples.
	if len(errs) != 5 {
		t.Errorf("%d errors, want 5: %v", len(errs), errs)
	}
	st, err := res.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if got := st["exact_match"]; got.Errors != 1 || got.CaseMeans["fr"] != 0.5 || got.CaseMeans["de"] != 1 {
		t.Errorf("exact_match stats: errors %d, fr %v, de %v", got.Errors, got.CaseMeans["fr"], got.CaseMeans["de"])
	}
	if got := st["flaky"]; got.Errors != 5 || got.CaseMeans["de"] != 0 || got.CaseMeans["it"] != 0 || got.CaseMeans["fr"] != 0.5 {
		t.Errorf("flaky stats: errors %d, means %v", got.Errors, got.CaseMeans)
	}
	it := res.Cases[2].Samples[0].MetricErrs[1]
	if it == nil || !errors.As(it, &se) || se.Metric != "flaky" {
		t.Errorf("out-of-range score not recorded: %v", it)
	}
}

func TestRunCancellation(t *testing.T) {
	ds := capitals(t)
	before := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	var started atomic.Int64
	runner := eval.RunnerFunc(func(ctx context.Context, c eval.Case, sample int) (eval.Answer, error) {
		if started.Add(1) == 5 {
			once.Do(cancel)
		}
		<-ctx.Done() // a slow model that honours cancellation
		return eval.Answer{}, ctx.Err()
	})
	start := time.Now()
	res, err := eval.Run(ctx, ds, runner, []eval.Metric{eval.ExactMatch{}}, eval.Options{Runs: 10, Concurrency: 8})
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("Run = %v, %v; want nil, context.Canceled", res, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("cancellation took %v", d)
	}
	if n := started.Load(); n > 8+5 {
		t.Errorf("%d samples started after cancellation", n)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Run, %d before: a goroutine leaked", n, before)
	}

	// Already cancelled: nothing runs.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	called := false
	_, err = eval.Run(ctx, ds, eval.RunnerFunc(func(context.Context, eval.Case, int) (eval.Answer, error) {
		called = true
		return eval.Answer{}, nil
	}), []eval.Metric{eval.ExactMatch{}}, eval.Options{})
	if !errors.Is(err, context.Canceled) || called {
		t.Errorf("err = %v, runner called %v; want context.Canceled and no call", err, called)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	ds := capitals(t)
	ok := seededRunner(0, 1, 0)
	dup, _ := eval.NewDataset("d", "1", nil)
	dup.Cases = []eval.Case{{ID: "a", Input: "q"}, {ID: "a", Input: "q"}}
	tests := []struct {
		name    string
		ds      *eval.Dataset
		runner  eval.Runner
		metrics []eval.Metric
	}{
		{"nil dataset", nil, ok, []eval.Metric{eval.ExactMatch{}}},
		{"empty dataset", &eval.Dataset{Name: "e"}, ok, []eval.Metric{eval.ExactMatch{}}},
		{"duplicate ids", dup, ok, []eval.Metric{eval.ExactMatch{}}},
		{"no runner", ds, nil, []eval.Metric{eval.ExactMatch{}}},
		{"no metrics", ds, ok, nil},
		{"metric twice", ds, ok, []eval.Metric{eval.ExactMatch{}, eval.ExactMatch{}}},
	}
	for _, tt := range tests {
		if _, err := eval.Run(context.Background(), tt.ds, tt.runner, tt.metrics, eval.Options{}); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func BenchmarkRun(b *testing.B) {
	ds := capitals(b)
	metrics := []eval.Metric{eval.ExactMatch{}, eval.NormalizedContains{}}
	runner := seededRunner(0, 0.6, 0)
	for b.Loop() {
		if _, err := eval.Run(context.Background(), ds, runner, metrics, eval.Options{Runs: 10, Concurrency: 8}); err != nil {
			b.Fatal(err)
		}
	}
}

func nan() float64 { var zero float64; return zero / zero }

// TestGatherEqualsRun runs every sample on its own, in reverse order as a
// job queue's workers might, and gathers them: the result is Run's.
func TestGatherEqualsRun(t *testing.T) {
	ds := capitals(t)
	metrics := []eval.Metric{eval.ExactMatch{}, eval.NormalizedContains{}}
	runner := eval.RunnerFunc(func(ctx context.Context, c eval.Case, k int) (eval.Answer, error) {
		if err := eval.RecordPin(ctx, eval.ModelPin{Role: eval.RoleTarget, Alias: "small", Model: "fake-model-v1", Provider: "fake"}); err != nil {
			return eval.Answer{}, err
		}
		return seededRunner(3, 0.6, 0).Run(ctx, c, k)
	})
	want, err := eval.Run(context.Background(), ds, runner, metrics, eval.Options{Runs: 3, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	samples := make([][]eval.Sample, len(ds.Cases))
	var pins []eval.ModelPin
	for i := len(ds.Cases) - 1; i >= 0; i-- {
		samples[i] = make([]eval.Sample, 3)
		for k := 2; k >= 0; k-- {
			s, p := eval.RunSample(context.Background(), ds.Cases[i], k, runner, metrics)
			samples[i][k] = s
			pins = append(pins, p...)
		}
	}
	got, err := eval.Gather(ds, metrics, samples, pins)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(eval.Sample{}, "Latency")); diff != "" {
		t.Fatalf("gathered result differs from Run's (-run +gather):\n%s", diff)
	}
	samples[0] = samples[0][:2]
	if _, err := eval.Gather(ds, metrics, samples, pins); err == nil {
		t.Fatal("gathered a case with a sample missing")
	}
}
