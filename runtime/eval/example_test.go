package eval_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"log"

	"github.com/aidgen/aid/runtime/eval"
)

func ExampleRun() {
	ds, err := eval.NewDataset("capitals", "1.0.0", []eval.Case{
		{ID: "fr", Input: "What is the capital of France?", Expected: "Paris"},
		{ID: "au", Input: "What is the capital of Australia?", Expected: "Canberra"},
	})
	if err != nil {
		log.Fatal(err)
	}
	// A stand-in for a model target: always right about France, right about Australia
	// on even samples only, and chatty.
	runner := eval.RunnerFunc(func(ctx context.Context, c eval.Case, sample int) (eval.Answer, error) {
		if c.ID == "au" && sample%2 == 1 {
			return eval.Answer{Text: "Sydney.", CostUSD: 0.001}, nil
		}
		return eval.Answer{Text: "It is " + c.Expected + ".", CostUSD: 0.001}, nil
	})
	res, err := eval.Run(context.Background(), ds, runner,
		[]eval.Metric{eval.ExactMatch{}, eval.NormalizedContains{}},
		eval.Options{Runs: 4, Concurrency: 2})
	if err != nil {
		log.Fatal(err)
	}
	stats, err := res.Stats()
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range res.Metrics {
		st := stats[m.Name]
		fmt.Printf("%-19s mean %.3f  fr %.2f  au %.2f\n", m.Name, st.Mean, st.CaseMeans["fr"], st.CaseMeans["au"])
	}
	fmt.Printf("%d samples, cost $%.3f\n", len(res.Cases)*res.Runs, res.CostUSD)
	// Output:
	// exact_match         mean 0.000  fr 0.00  au 0.00
	// normalized_contains mean 0.750  fr 1.00  au 0.50
	// 8 samples, cost $0.008
}

// hashRunner answers case c correctly when a hash of (version, case, sample) falls
// below accuracy: a deterministic stand-in for a sampled model.
func hashRunner(version string, accuracy float64) eval.Runner {
	return eval.RunnerFunc(func(_ context.Context, c eval.Case, sample int) (eval.Answer, error) {
		h := fnv.New32a()
		fmt.Fprintf(h, "%s/%s/%d", version, c.ID, sample)
		if float64(h.Sum32()%1000)/1000 < accuracy {
			return eval.Answer{Text: c.Expected}, nil
		}
		return eval.Answer{Text: "?"}, nil
	})
}

func ExampleGate() {
	var cases []eval.Case
	for i := range 200 {
		cases = append(cases, eval.Case{ID: fmt.Sprint(i), Input: fmt.Sprintf("question %d", i), Expected: fmt.Sprint(i)})
	}
	ds, err := eval.NewDataset("synthetic", "1", cases)
	if err != nil {
		log.Fatal(err)
	}
	metrics := []eval.Metric{eval.ExactMatch{}}
	run := func(version string, accuracy float64, runs int) map[string]eval.MetricStats {
		res, err := eval.Run(context.Background(), ds, hashRunner(version, accuracy), metrics, eval.Options{Runs: runs, Concurrency: 8})
		if err != nil {
			log.Fatal(err)
		}
		stats, err := res.Stats()
		if err != nil {
			log.Fatal(err)
		}
		return stats
	}
	baseline := &eval.Baseline{Dataset: "synthetic", DatasetVersion: "1", Metrics: run("v1", 0.8, 10)}
	thresholds := []eval.Threshold{{Metric: "exact_match", MaxRegression: 0.05, Alpha: 0.05}}

	for _, tc := range []struct {
		name     string
		accuracy float64
		runs     int
	}{
		{"same model, enough runs", 0.8, 10},
		{"worse model", 0.6, 10},
		{"same model, 1 run", 0.8, 1},
	} {
		rep, err := eval.Gate(thresholds, run("v2-"+tc.name, tc.accuracy, tc.runs), baseline)
		if err != nil {
			log.Fatal(err)
		}
		r := rep.Results[0]
		fmt.Printf("%s: %s, baseline %.3f, current %.3f, MDE %.3f\n",
			tc.name, r.Verdict, r.BaselineMean, r.CurrentMean, r.MDE)
		if r.Verdict == eval.Inconclusive {
			fmt.Println("  advice:", r.Advice)
		}
	}
	// Output:
	// same model, enough runs: pass, baseline 0.799, current 0.799, MDE 0.033
	// worse model: regression, baseline 0.799, current 0.603, MDE 0.037
	// same model, 1 run: inconclusive, baseline 0.799, current 0.795, MDE 0.077
	//   advice: run at least 4 runs per case (MDE at 1 run: 0.0773; needed: ≤ 0.0500)
}

func ExampleNormalizedContains() {
	m := eval.NormalizedContains{}
	c := eval.Case{ID: "co", Expected: "Bogotá"}
	for _, answer := range []string{"The capital is BOGOTA.", "bogotá, D.C.", "Medellín"} {
		score, _ := m.Score(context.Background(), c, answer)
		fmt.Printf("%-24q %.0f  %q\n", answer, score, m.Normalize(answer))
	}
	// Output:
	// "The capital is BOGOTA." 1  ["the" "capital" "is" "bogota"]
	// "bogotá, D.C."           1  ["bogota" "dc"]
	// "Medellín"               0  ["medellin"]
}

// A runner that calls a model itself reports the model with RecordPin; a baseline keeps
// the pins, and CompareModels says what a later run changed.
func ExampleCompareModels() {
	ds, err := eval.NewDataset("capitals", "1.0.0", []eval.Case{
		{ID: "fr", Input: "What is the capital of France?", Expected: "Paris"},
	})
	if err != nil {
		log.Fatal(err)
	}
	sampleWith := func(model string) *eval.Result {
		runner := eval.RunnerFunc(func(ctx context.Context, c eval.Case, sample int) (eval.Answer, error) {
			pin := eval.ModelPin{Role: eval.RoleTarget, Alias: "small", Model: model, Provider: "fake"}
			if err := eval.RecordPin(ctx, pin); err != nil {
				return eval.Answer{}, err
			}
			return eval.Answer{Text: c.Expected, Model: model}, nil
		})
		res, err := eval.Run(context.Background(), ds, runner, []eval.Metric{eval.ExactMatch{}}, eval.Options{Runs: 2})
		if err != nil {
			log.Fatal(err)
		}
		return res
	}
	baseline, err := eval.NewBaseline(sampleWith("fake-chat-2024-06-01"), "v0.1.0", "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("baseline:", baseline.Pins[0])
	for _, c := range eval.CompareModels(baseline, sampleWith("fake-chat-2024-09-01").Pins) {
		fmt.Println("changed:", c)
	}
	// Output:
	// baseline: small: fake-chat-2024-06-01 (fake)
	// changed: small: fake-chat-2024-06-01 → fake-chat-2024-09-01
}
