package eval

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestGroupPowerLevel: with no excess regression the planned "power" is the test's
// level, α for equal groups (where CR2 is unbiased), whatever the degrees of freedom.
func TestGroupPowerLevel(t *testing.T) {
	for _, g := range []int{3, 5, 20} {
		sizes := make([]float64, g)
		for i := range sizes {
			sizes[i] = 6
		}
		d := groupDesign{Sizes: sizes, Between: 0.01, Within: 0.02, Wc: 0.2, Wb: 0.2, Kb: 10}
		if p := d.power(sizes, 0.05, 0, 0.05); math.Abs(p-0.05) > 1e-6 {
			t.Errorf("%d groups: power at no excess %v, want 0.05", g, p)
		}
	}
}

// TestGroupPowerSimulated checks the planned power against the test it predicts: the
// CR2 variance and Bell–McCaffrey degrees of freedom of clustered, on Gaussian data
// drawn from the design, at a true excess of the allowance. Equal groups and one group
// holding 60% of the cases, where CR2 is biased and the degrees of freedom few.
func TestGroupPowerSimulated(t *testing.T) {
	const sims = 4000
	cases := []struct {
		name  string
		sizes []float64
		d     groupDesign
	}{
		{"10 equal", []float64{12, 12, 12, 12, 12, 12, 12, 12, 12, 12}, groupDesign{Between: 0.002, Within: 0.004, Wc: 0.2, Wb: 0.2, Kb: 10}},
		{"5, one 60%", []float64{72, 12, 12, 12, 12}, groupDesign{Between: 0.0004, Within: 0.004, Wc: 0.2, Wb: 0.2, Kb: 10}},
		{"20 skewed", []float64{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 8, 8, 9, 10, 11, 12, 13}, groupDesign{Between: 0.003, Within: 0.001, Wc: 0.1, Wb: 0.1, Kb: 20}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := c.d
			d.Sizes = c.sizes
			const kc, delta, alpha = 3.0, 0.05, 0.05
			noise := d.Wc/kc + d.Wb/d.Kb
			want := d.power(d.Sizes, noise, delta, alpha)
			r := rand.New(rand.NewPCG(uint64(i), 9))
			var ids []string
			groups := map[string]string{}
			for g, m := range c.sizes {
				for range int(m) {
					id := fmt.Sprintf("c%04d", len(ids))
					ids = append(ids, id)
					groups[id] = fmt.Sprint(g)
				}
			}
			x := make([]float64, len(ids))
			hits := 0
			for range sims {
				var sum float64
				j := 0
				for _, m := range c.sizes {
					u := math.Sqrt(d.Between) * r.NormFloat64()
					for range int(m) {
						x[j] = 2*delta + u + math.Sqrt(d.Within+noise)*r.NormFloat64()
						sum += x[j]
						j++
					}
				}
				mean := sum / float64(len(x))
				fit, _ := clustered(ids, x, mean, groups, nil)
				if tSurvival((mean-delta)/math.Sqrt(fit.v), fit.df) <= alpha {
					hits++
				}
			}
			got := float64(hits) / sims
			if tol := 3*math.Sqrt(want*(1-want)/sims) + 0.02; math.Abs(got-want) > tol {
				t.Errorf("planned power %.3f, simulated %.3f (tolerance %.3f)", want, got, tol)
			}
			t.Logf("planned power %.3f, simulated %.3f", want, got)
		})
	}
}

// TestRunsToPowerIsSmallest: at the advised runs the planned power reaches GatePower,
// one run fewer it does not; a group floor no runs can pass gives 0, and the groups
// advised instead reach the power while one group fewer does not.
func TestRunsToPowerIsSmallest(t *testing.T) {
	d := groupDesign{Sizes: []float64{30, 30, 30, 30, 30, 30, 30, 30, 30, 30}, Between: 0.0005, Within: 0.002, Wc: 0.24, Wb: 0.24, Kb: 20}
	const delta, alpha = 0.05, 0.05
	k, p := d.runsToPower(delta, alpha, false)
	at := func(k int) float64 { return d.power(d.Sizes, d.Wc/float64(k)+d.Wb/d.Kb, delta, alpha) }
	if k < 2 || p < GatePower || at(k) != p || at(k-1) >= GatePower {
		t.Errorf("runs %d: power %v there, %v one fewer", k, at(k), at(k-1))
	}
	floor := d
	floor.Between = 0.01
	if k, best := floor.runsToPower(delta, alpha, true); k != 0 || best >= GatePower {
		t.Errorf("a group floor: runs %d, power at unlimited runs %v; want none", k, best)
	}
	extra, reached := floor.groupsToPower(2, delta, alpha)
	grown := func(e int) []float64 {
		s := append([]float64(nil), floor.Sizes...)
		for range e {
			s = append(s, 30)
		}
		return s
	}
	noise := floor.Wc/2 + floor.Wb/floor.Kb
	if extra < 1 || reached < GatePower || floor.power(grown(extra-1), noise, delta, alpha) >= GatePower {
		t.Errorf("groups: %d more reach %v; one fewer %v", extra, reached, floor.power(grown(extra-1), noise, delta, alpha))
	}
}

// TestPlanDegenerate: a design without variance plans one run at full power, and
// variances that are NaN, infinite or negative, or groups without cases, are refused
// with errNoDesign and a plan that says so, never a panic or a NaN run count.
func TestPlanDegenerate(t *testing.T) {
	quiet := groupDesign{Sizes: []float64{4, 4, 4}, Kb: 3}
	if k, p := quiet.runsToPower(0.05, 0.05, false); k != 1 || p != 1 {
		t.Errorf("variance-free design: runs %d, power %v; want 1, 1", k, p)
	}
	if e, p := quiet.groupsToPower(3, 0.05, 0.05); e != 0 || p != 1 {
		t.Errorf("variance-free design: %d more groups, power %v; want 0, 1", e, p)
	}
	nan := math.NaN()
	for _, bad := range []struct {
		ssb, ssw, wc float64
		sizes        []float64
	}{
		{nan, 1, 0.1, []float64{4, 4, 4}},
		{1, math.Inf(1), 0.1, []float64{4, 4, 4}},
		{1, 1, -0.1, []float64{4, 4, 4}},
		{1, 1, 0.1, []float64{4}},
		{1, 1, 0.1, []float64{4, 0, 4}},
	} {
		if _, _, err := estimateDesign(bad.sizes, bad.ssb, bad.ssw, bad.wc, 0.1, 2, 10); !errors.Is(err, errNoDesign) {
			t.Errorf("%+v: error %v, want errNoDesign", bad, err)
		}
	}
	r := &ThresholdResult{Threshold: Threshold{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}}
	planGrouped(r, comparison{clusters: 3, n: 12, kc: 2, kb: 10, designErr: errNoDesign}, 0.05)
	if r.RunsNeeded != 0 || r.GroupsNeeded != 0 || !strings.Contains(r.Advice, "cannot be estimated") {
		t.Errorf("no design: runs %d, groups %d, advice %q", r.RunsNeeded, r.GroupsNeeded, r.Advice)
	}
	d := groupDesign{Sizes: []float64{4, 4, 4}, Between: nan, Kb: 10}
	r = &ThresholdResult{Threshold: Threshold{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}}
	planGrouped(r, comparison{clusters: 3, n: 12, kc: 2, kb: 10, design: d}, 0.05)
	if r.RunsNeeded != 0 || !strings.Contains(r.Advice, "cannot be estimated") {
		t.Errorf("NaN between-group variance: runs %d, advice %q", r.RunsNeeded, r.Advice)
	}
}
