package lower_test

import (
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/eval"
)

// TestThresholdBoundsAgree feeds thresholds at, inside and outside every
// bound of minMean, failBelow, maxRegression and alpha through ir (what aidgen vet
// runs) and through lower.Document and app.Assemble (what aidgen eval runs, ending in the eval
// runtime's ValidateThresholds), and requires them to agree.
//
// The bounds are written twice, in schema.cue and in runtime/eval: ir
// cannot call the runtime's validation, because ir must not depend on
// runtime/eval (which may import runtime/agents, which ir never imports).
// This test is what keeps the two one rule: every threshold ir accepts,
// the runtime accepts; and every value the runtime accepts that the IR can
// write exactly, ir accepts. (A decimal the runtime only sees rounded, such
// as 0.50000000000000001 for alpha, may be refused by ir alone: ir compares
// what the user wrote.)
func TestThresholdBoundsAgree(t *testing.T) {
	dir := datasetDir(t)
	values := []string{
		"-1", "-1e-400", "0", "1e-400", "5e-324", "1e-300", "0.05",
		"0.49999999999999999999", "0.5", "0.5000000000000001", "0.50000000000000001",
		"0.9999999999999999", "0.99999999999999999999", "1", "1.0", "1.0000000000000002", "1.5", "1e400",
	}
	for _, field := range []string{"minMean", "failBelow", "maxRegression", "alpha"} {
		for _, value := range values {
			t.Run(field+"="+value, func(t *testing.T) {
				th := map[string]string{"maxRegression": "0.05", "alpha": "0.05"}
				th[field] = value
				src := thresholdApp(fmt.Sprintf(`maxRegression: %s, alpha: %s%s`,
					th["maxRegression"], th["alpha"], map[string]string{"minMean": ", minMean: " + value, "failBelow": ", failBelow: " + value}[field]))
				doc, err := ir.LoadBytes(filepath.Join(dir, "app.cue"), []byte(src))
				if err != nil {
					if _, invalid := ir.IsInvalid(err); !invalid {
						t.Fatalf("ir.LoadBytes: %v, want an ir.Errors or success", err)
					}
					// ir refuses: the runtime must refuse the float it would
					// hold, whenever that float is exactly what was written.
					f, exact := float(value)
					if !exact {
						return
					}
					thr := eval.Threshold{Metric: "exact_match", MaxRegression: 0.05, Alpha: 0.05}
					switch field {
					case "minMean":
						thr.MinMean = &f
					case "failBelow":
						thr.FailBelow = &f
					case "maxRegression":
						thr.MaxRegression = f
					case "alpha":
						thr.Alpha = f
					}
					if rerr := eval.ValidateThresholds([]eval.Threshold{thr}, []eval.Metric{eval.ExactMatch{}}); rerr == nil {
						t.Errorf("ir refuses %s: %s, but the eval runtime accepts it:\n%v", field, value, err)
					}
					return
				}
				if _, err := tryAssemble(doc, app.Options{}); err != nil {
					var gce *eval.GateConfigurationError
					if !errors.As(err, &gce) {
						t.Fatalf("app.Assemble: %v", err)
					}
					t.Errorf("ir accepts %s: %s, but aidgen eval refuses it: %v", field, value, err)
				}
			})
		}
	}
}

// TestFailBelowAtMostMinMean: ir and the runtime agree that failBelow may
// not exceed minMean (a mean between them would both pass and fail).
func TestFailBelowAtMostMinMean(t *testing.T) {
	dir := datasetDir(t)
	for _, tc := range []struct {
		failBelow, minMean string
		ok                 bool
	}{{"0.8", "0.8", true}, {"0.7", "0.8", true}, {"0.9", "0.8", false}, {"0.8000000000000001", "0.8", false}} {
		src := thresholdApp(fmt.Sprintf("maxRegression: 0.05, failBelow: %s, minMean: %s", tc.failBelow, tc.minMean))
		_, err := ir.LoadBytes(filepath.Join(dir, "app.cue"), []byte(src))
		if (err == nil) != tc.ok {
			t.Errorf("failBelow %s, minMean %s: ir says %v, want ok %v", tc.failBelow, tc.minMean, err, tc.ok)
		}
		fb, _ := float(tc.failBelow)
		mm, _ := float(tc.minMean)
		rerr := eval.ValidateThresholds([]eval.Threshold{{Metric: "exact_match", MaxRegression: 0.05, Alpha: 0.05, FailBelow: &fb, MinMean: &mm}},
			[]eval.Metric{eval.ExactMatch{}})
		if (rerr == nil) != tc.ok {
			t.Errorf("failBelow %s, minMean %s: the runtime says %v, want ok %v", tc.failBelow, tc.minMean, rerr, tc.ok)
		}
	}
}

// datasetDir is a directory holding the one-case dataset thresholdApp reads.
func datasetDir(t *testing.T) string {
	dir := t.TempDir()
	dataset := `{"name": "d", "version": "1", "cases": [{"id": "a", "input": "q", "expected": "a"}]}`
	if err := os.WriteFile(filepath.Join(dir, "dataset.json"), []byte(dataset), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// thresholdApp is an application whose one eval has one threshold on
// exact_match with the given fields (CUE, after the metric).
func thresholdApp(fields string) string {
	return `name: "x", version: "1.0.0"
providers: p: kind: "fake"
models: "m-1": {provider: "p", contextWindow: 1000, maxOutputTokens: 10, cost: inputPer1kUSD: 0}
aliases: m: "m-1"
evals: e: {
	dataset: "dataset.json"
	target: {model: "m", prompt: "{{.Input}}"}
	metrics: ["exact_match"]
	baseline: "baseline.json"
	thresholds: [{metric: "exact_match", ` + fields + `}]
}
`
}

// float is the float64 nearest to the decimal s, and whether it is s
// exactly.
func float(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return f, false
	}
	r, ok := new(big.Rat).SetString(s)
	return f, ok && new(big.Rat).SetFloat64(f).Cmp(r) == 0
}
