package eval

import (
	"math"
	"testing"
)

func TestHolm(t *testing.T) {
	tests := []struct {
		p, want []float64
	}{
		{[]float64{0.01}, []float64{0.01}},
		{[]float64{0.01, 0.04, 0.03}, []float64{0.03, 0.06, 0.06}},
		{[]float64{0.5, 0.001, 0.02, 0.9}, []float64{1, 0.004, 0.06, 1}},
		// Step-down monotonicity: a larger p never gets a smaller adjusted value.
		{[]float64{0.02, 0.021}, []float64{0.04, 0.04}},
	}
	for _, tt := range tests {
		results := make([]ThresholdResult, len(tt.p)+1) // one untested threshold stays out
		var tested []int
		for i, p := range tt.p {
			results[i+1].PValue = p
			tested = append(tested, i+1)
		}
		holm(results, tested)
		if results[0].AdjustedPValue != 0 {
			t.Error("an untested threshold was adjusted")
		}
		for i, w := range tt.want {
			if got := results[i+1].AdjustedPValue; math.Abs(got-w) > 1e-12 {
				t.Errorf("p %v: adjusted[%d] = %v, want %v", tt.p, i, got, w)
			}
		}
	}
}

func TestRunsFor(t *testing.T) {
	tests := []struct {
		room, w float64
		want    int
	}{
		{room: 0.01, w: 0.24, want: 24},
		{room: 0.01, w: 0.2400001, want: 25},
		{room: 0.3, w: 0.24, want: 1},
		{room: 0, w: 0.24, want: 0},
		{room: -1, w: 0.24, want: 0},
		{room: 0, w: 0, want: 1},
		{room: -1, w: 0, want: 0},
	}
	for _, tt := range tests {
		if got := runsFor(tt.room, tt.w); got != tt.want {
			t.Errorf("runsFor(%v, %v) = %d, want %d", tt.room, tt.w, got, tt.want)
		}
	}
}

// TestPlanReachesTarget checks the recommendation against its definition: at RunsNeeded
// the planned MDE (with the assurance factor) is within maxRegression, one run fewer it
// is not.
func TestPlanReachesTarget(t *testing.T) {
	c := comparison{paired: true, n: 200, se: 0.03, df: 199, a: 0.0002 / 200, wc: 0.2 / 200, wb: 0.2 / 200, kc: 2, kb: 10}
	r := &ThresholdResult{Threshold: Threshold{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}, Cases: 200}
	r.tAlpha = tQuantile(0.95, c.df)
	plan(r, c, 1)
	lambda := tQuantile(0.95, c.df) + tQuantile(GatePower, c.df)
	mde := func(k float64) float64 { return lambda * math.Sqrt(assurance(c.df)*(c.a+c.wc/k+c.wb/c.kb)) }
	k := float64(r.RunsNeeded)
	if r.RunsNeeded < 2 || mde(k) > 0.05 || mde(k-1) <= 0.05 {
		t.Errorf("RunsNeeded %d: planned MDE %v at it, %v one below", r.RunsNeeded, mde(k), mde(k-1))
	}
	both := func(k float64) float64 { return lambda * math.Sqrt(assurance(c.df)*(c.a+(c.wc+c.wb)/k)) }
	kb := float64(r.RunsNeededNewBaseline)
	if both(kb) > 0.05 || both(kb-1) <= 0.05 {
		t.Errorf("RunsNeededNewBaseline %v: %v, %v", kb, both(kb), both(kb-1))
	}
	if r.MDE != lambda*c.se {
		t.Errorf("MDE %v, want %v", r.MDE, lambda*c.se)
	}
}

// TestHolmNaN: a NaN p-value sorts first under cmp.Compare and max(x, NaN) is NaN, so it
// poisoned every later adjusted p and a metric that fell from 1 to 0 passed. A p that is
// not a probability counts as 1 and its threshold is inconclusive.
func TestHolmNaN(t *testing.T) {
	results := make([]ThresholdResult, 2)
	for i := range results {
		results[i].Threshold = Threshold{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}
		results[i].Tested = true
		results[i].MDE = 0.01
		results[i].Regression = 1
		results[i].UpperBound = 1
	}
	results[0].PValue = math.NaN()
	results[1].PValue = 1e-6 // fell from 1 to 0
	holm(results, []int{0, 1})
	if results[1].AdjustedPValue != 2e-6 || results[0].AdjustedPValue != 1 {
		t.Errorf("adjusted %v, %v; want 1, 2e-6", results[0].AdjustedPValue, results[1].AdjustedPValue)
	}
	for i := range results {
		decide(&results[i])
	}
	if results[1].Verdict != Regression || results[0].Verdict != Inconclusive {
		t.Errorf("verdicts %v (%s), %v (%s)", results[0].Verdict, results[0].Reason, results[1].Verdict, results[1].Reason)
	}
}
