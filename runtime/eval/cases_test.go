package eval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/eval"
)

// rename returns st with the case ids in from renamed to the ids in to.
func rename(st eval.MetricStats, from, to []string) eval.MetricStats {
	cm := make(map[string]float64, len(st.CaseMeans))
	for id, v := range st.CaseMeans {
		cm[id] = v
	}
	for i, id := range from {
		cm[to[i]] = cm[id]
		delete(cm, id)
	}
	st.CaseMeans = cm
	return st
}

// TestGatePairsMatchedCases: one renamed id used to turn the whole threshold into an
// unpaired Welch test over all cases, with the unmatched cases neither dropped nor
// reported. The gate pairs the matched cases and lists the others.
func TestGatePairsMatchedCases(t *testing.T) {
	th := eval.Threshold{MaxRegression: 0.05, Alpha: 0.05}
	base := synth(2, "c", 100, 10, spread(0.6))
	cur := rename(synth(1, "c", 100, 10, spread(0.6)), []string{"c000", "c001"}, []string{"new-a", "new-b"})
	cur = rename(cur, []string{"c002"}, []string{"new-c"})
	r := gateOne(t, th, cur, base)
	if !r.Paired || r.MatchedCases != 97 || r.Cases != 97 ||
		!slices.Equal(r.AddedCases, []string{"new-a", "new-b", "new-c"}) || !slices.Equal(r.RemovedCases, []string{"c000", "c001", "c002"}) {
		t.Errorf("paired %v, matched %d, cases %d, added %v, removed %v", r.Paired, r.MatchedCases, r.Cases, r.AddedCases, r.RemovedCases)
	}
	if want := "paired over 97 matched cases; 3 added and 3 removed cases not compared"; !strings.HasPrefix(r.Basis, want) {
		t.Errorf("basis %q, want prefix %q", r.Basis, want)
	}
	// The regression is the mean difference over the matched cases only.
	var sum float64
	for id, b := range base.CaseMeans {
		if c, ok := cur.CaseMeans[id]; ok {
			sum += b - c
		}
	}
	if want := sum / 97; math.Abs(r.Regression-want) > 1e-12 {
		t.Errorf("regression %v, want %v over the matched cases", r.Regression, want)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"matchedCases":97`, `"addedCases":["new-a","new-b","new-c"]`, `"removedCases":["c000","c001","c002"]`, `"basis":"paired over 97`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}

	// A subset of the baseline's cases: the hardest half, with no change at all, is
	// compared with itself and not with the easy half it left out.
	sub := synth(1, "c", 100, 10, spread(0.6))
	for id := range sub.CaseMeans {
		if base.CaseMeans[id] > 0.6 {
			delete(sub.CaseMeans, id)
			continue
		}
		sub.CaseMeans[id] = base.CaseMeans[id] // identical to the baseline
	}
	sub.Cases = len(sub.CaseMeans)
	r = gateOne(t, th, sub, base)
	if r.Verdict == eval.Regression || !r.Paired || r.MatchedCases != sub.Cases || len(r.RemovedCases) != 100-sub.Cases || math.Abs(r.Regression) > 1e-12 {
		t.Errorf("hardest cases unchanged: verdict %v, paired %v, matched %d, removed %d, regression %v: %s",
			r.Verdict, r.Paired, r.MatchedCases, len(r.RemovedCases), r.Regression, r.Reason)
	}

	// Fewer than 2 matched cases: inconclusive with the reason, never Welch.
	one := rename(synth(1, "c", 3, 10, spread(0.6)), []string{"c000", "c001"}, []string{"x", "y"})
	r = gateOne(t, th, one, synth(2, "c", 3, 10, spread(0.6)))
	if r.Verdict != eval.Inconclusive || r.Tested || r.MatchedCases != 1 || !strings.Contains(r.Reason, "only 1 of the current run's case ids are in the baseline (2 added, 2 removed)") {
		t.Errorf("one match: verdict %v, tested %v, matched %d: %s", r.Verdict, r.Tested, r.MatchedCases, r.Reason)
	}
	// Welch only when a side has no per-case means, and Basis says so.
	r = gateOne(t, th, synth(1, "c", 100, 10, spread(0.6)), noCaseMeans(base))
	if r.Paired || !strings.Contains(r.Basis, "unpaired (Welch)") || !strings.Contains(r.Basis, "the baseline has no per-case means") {
		t.Errorf("unpaired: paired %v, basis %q", r.Paired, r.Basis)
	}
}

// TestGateClustersOnGroups checks the cluster-robust standard error against its formula
// and that cases without a group are their own cluster.
func TestGateClustersOnGroups(t *testing.T) {
	// Per-case differences: group g1 {0.3, 0.3}, group g2 {0.1, 0.1}, ungrouped e {0.2}.
	base := eval.MetricStats{Runs: 2, Cases: 5, Mean: 0.6, WithinCaseVariance: 1e-6,
		CaseMeans: map[string]float64{"a": 0.8, "b": 0.8, "c": 0.6, "d": 0.6, "e": 0.2}}
	cur := eval.MetricStats{Runs: 2, Cases: 5, Mean: 0.4, WithinCaseVariance: 1e-6,
		CaseMeans: map[string]float64{"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5, "e": 0.0}}
	cur.Groups = map[string]string{"a": "g1", "b": "g1", "c": "g2", "d": "g2"}
	r := gateOne(t, eval.Threshold{MaxRegression: 0.05, Alpha: 0.05}, cur, base)
	// d̄ = 0.2; cluster sums of residuals: 0.2, −0.2, 0 over 2, 2 and 1 of 5 cases; G = 3.
	// CR2 divides each squared sum by 1 − n_g/n (CR1 would multiply all by G/(G−1)).
	want := math.Sqrt((0.04/(1-0.4) + 0.04/(1-0.4)) / 25)
	// The residuals within each group are equal, so the working correlation is 1 and the
	// Bell–McCaffrey degrees of freedom for sizes {2, 2, 1} are 1.5505 (checked against
	// the dense matrices in TestBellMcCaffreyDF), below G − 1 = 2.
	if r.Clusters != 3 || math.Abs(r.DF-1.550458715596331) > 1e-9 || math.Abs(r.SE-want) > 1e-12 || math.Abs(r.Regression-0.2) > 1e-12 ||
		!strings.Contains(r.Basis, "clustered over 3 groups (CR2, 1.6 degrees of freedom)") {
		t.Errorf("clusters %d, df %v, SE %v (want %v), regression %v, basis %q", r.Clusters, r.DF, r.SE, want, r.Regression, r.Basis)
	}
	// The baseline's groups serve when the current run has none.
	cur2 := cur
	cur2.Groups, base.Groups = nil, cur.Groups
	if r2 := gateOne(t, eval.Threshold{MaxRegression: 0.05, Alpha: 0.05}, cur2, base); r2.Clusters != 3 || r2.SE != r.SE {
		t.Errorf("groups from the baseline: clusters %d, SE %v", r2.Clusters, r2.SE)
	}
	// One group for every matched case, or two: no clustered comparison is made, and the
	// advice names the groups needed.
	for _, tc := range []struct {
		groups        map[string]string
		reason, extra string
	}{
		{map[string]string{"a": "g", "b": "g", "c": "g", "d": "g", "e": "g"}, "form 1 group;", "2 more groups"},
		{map[string]string{"a": "g", "b": "g", "c": "g", "d": "h", "e": "h"}, "form 2 groups;", "1 more group,"},
	} {
		cur.Groups, base.Groups = tc.groups, nil
		r = gateOne(t, eval.Threshold{MaxRegression: 0.05, Alpha: 0.05}, cur, base)
		if r.Verdict != eval.Inconclusive || r.Tested || !strings.Contains(r.Reason, tc.reason) || !strings.Contains(r.Reason, "needs at least 3 groups") ||
			!strings.Contains(r.Advice, "add cases from at least "+tc.extra) {
			t.Errorf("%s: verdict %v, tested %v: %s; advice %q", tc.reason, r.Verdict, r.Tested, r.Reason, r.Advice)
		}
	}
	// Groups must name known cases.
	bad := cur
	bad.Groups = map[string]string{"zz": "g"}
	if _, err := eval.Gate([]eval.Threshold{{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}}, map[string]eval.MetricStats{"m": bad},
		&eval.Baseline{Metrics: map[string]eval.MetricStats{"m": base}}); err == nil || !strings.Contains(err.Error(), `groups: case "zz" has no case mean`) {
		t.Errorf("unknown grouped case: %v", err)
	}
}

// TestGroupsFlowFromDatasetToBaseline: a case's group reaches the run's statistics and
// the baseline file, and a baseline written before groups existed still loads.
func TestGroupsFlowFromDatasetToBaseline(t *testing.T) {
	ds, err := eval.ParseDatasetJSONL("g.jsonl", []byte(
		`{"id": "a", "input": "q1", "expected": "x", "group": "doc1"}`+"\n"+
			`{"id": "b", "input": "q2", "expected": "x", "group": "doc1"}`+"\n"+
			`{"id": "c", "input": "q3", "expected": "x"}`+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	runner := eval.RunnerFunc(func(_ context.Context, c eval.Case, k int) (eval.Answer, error) {
		return eval.Answer{Text: map[bool]string{true: "x", false: "y"}[k%2 == 0]}, nil
	})
	res, err := eval.Run(context.Background(), ds, runner, []eval.Metric{eval.ExactMatch{}}, eval.Options{Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eval.NewBaseline(res, "v", "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "doc1", "b": "doc1"}
	if got := b.Metrics["exact_match"].Groups; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("groups %v, want %v", got, want)
	}
	data, err := eval.MarshalBaseline(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"groups": {`) {
		t.Errorf("baseline file lacks the groups:\n%s", data)
	}
	back, err := eval.ParseBaseline("b.json", data)
	if err != nil || fmt.Sprint(back.Metrics["exact_match"].Groups) != fmt.Sprint(want) {
		t.Errorf("reread groups %v, %v", back.Metrics["exact_match"].Groups, err)
	}
	// A baseline without groups writes no "groups" key, so old files stay byte-identical.
	old := strings.Replace(string(data), string(data[strings.Index(string(data), `      "groups"`):strings.Index(string(data), `      "mean"`)]), "", 1)
	ob, err := eval.ParseBaseline("old.json", []byte(old))
	if err != nil || ob.Metrics["exact_match"].Groups != nil {
		t.Fatalf("old baseline: %v, groups %v", err, ob.Metrics["exact_match"].Groups)
	}
	if again, _ := eval.MarshalBaseline(ob); string(again) != old {
		t.Errorf("a baseline without groups does not round-trip byte for byte:\n%s", again)
	}
	if ch := eval.DiffBaselines(ob, b); len(ch) != 2 || ch[0].Path != "metrics.exact_match.groups.a" {
		t.Errorf("diff %v", ch)
	}
}
