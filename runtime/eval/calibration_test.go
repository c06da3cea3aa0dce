package eval_test

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/aidgen/aid/runtime/eval"
)

// The calibration tests simulate many complete gates (a baseline and a current run drawn
// from known populations) and check the rates the package documentation promises. They
// are seeded, so they are reproducible, and their bounds are tight enough to fail when
// the statistics are wrong: treating runs as independent samples, skipping Holm's
// correction, or ignoring the baseline's own noise each breaks one of them.

// population describes how hard the cases of a simulated dataset are and how one run of
// a case is scored.
type population struct {
	// difficulty draws a case's true mean score.
	difficulty func(r *rand.Rand, src rand.Source) float64
	// binary scores a run 1 with probability μ. Otherwise a run's score is uniform on
	// [μ−a, μ+a] with a = min(μ, 1−μ): continuous, within [0, 1], with mean μ.
	binary bool
	// mean is the population's mean difficulty, used when case sets are drawn afresh.
	mean float64
	// cycle, when set, fixes the true means instead: case i has cycle[i mod len(cycle)].
	cycle []float64
}

// scenario is one calibration setting.
type scenario struct {
	name     string
	pop      population
	cases    int
	baseRuns int
	delta    float64
	alpha    float64
	// unpaired draws the baseline's and the current run's cases independently from the
	// population and drops the baseline's per-case means: the explicit Welch comparison.
	unpaired bool
	// renamed gives the current run's first renamed cases new ids and fresh difficulties:
	// a dataset edit that removes some cases and adds others.
	renamed int
	// hardest restricts the current run to the hardest cases of the dataset (lowest true
	// mean): a non-random subset of the baseline's cases.
	hardest int
	// groups > 0 puts consecutive cases in that many groups whose runs share noise (a
	// Gaussian copula with correlation rho, the intra-class correlation of a run's latent
	// score, between the cases of a group in one run); declared says whether the cases
	// carry their group. The groups are of equal size (±1), or, with dominant > 0, the
	// first holds that share of the cases and the others split the rest.
	groups   int
	dominant float64
	rho      float64
	declared bool
	// runs > 0 fixes the current run's number of runs for every figure: the scenario is
	// too small for any advice to be feasible, and only its error rates are checked.
	runs int
	// fewCases marks a scenario with so few cases that the spread of the change from case
	// to case, which runs cannot average out, decides: every pilot must advise more cases,
	// and every figure follows each pilot's advice (RunsNeeded runs, or CasesNeeded cases
	// at 2 runs).
	fewCases bool
	// deterministic marks a system whose runs never vary: with no change every gate must
	// pass, by maxRegression.
	deterministic bool
	// showsProblem marks a scenario that demonstrates a miscalibration the gate cannot
	// see (undeclared groups): its boundary rate must exceed alpha.
	showsProblem bool
}

func calibrationScenarios() []scenario {
	beta := func(a, b float64) func(*rand.Rand, rand.Source) float64 {
		return func(_ *rand.Rand, src rand.Source) float64 { return distuv.Beta{Alpha: a, Beta: b, Src: src}.Rand() }
	}
	fixed := func(v float64) func(*rand.Rand, rand.Source) float64 {
		return func(*rand.Rand, rand.Source) float64 { return v }
	}
	// Declared groups are gated at a fixed 20 runs: from case means, noise that the cases
	// of a group share within a run cannot be told from a change they share, which no
	// runs average out, so the grouped advice plans for the latter and advises groups
	// here. TestCalibrationAdvice follows the grouped advice.
	clustered := scenario{name: "groups-declared", pop: population{difficulty: beta(5, 5)},
		cases: 100, baseRuns: 10, delta: 0.05, alpha: 0.05, groups: 20, rho: 0.5, declared: true, runs: 20}
	undeclared := clustered
	undeclared.name, undeclared.declared, undeclared.showsProblem, undeclared.runs = "groups-undeclared", false, true, 0
	return []scenario{
		{name: "binary", pop: population{difficulty: beta(6, 4), binary: true},
			cases: 200, baseRuns: 10, delta: 0.05, alpha: 0.05},
		{name: "continuous", pop: population{difficulty: beta(5, 5)},
			cases: 60, baseRuns: 10, delta: 0.05, alpha: 0.05},
		// Cases differ strongly in difficulty: 40% nearly always right, 40% nearly always
		// wrong, 20% anywhere in between.
		{name: "bimodal-difficulty", pop: population{binary: true, difficulty: func(r *rand.Rand, src rand.Source) float64 {
			switch u := r.Float64(); {
			case u < 0.4:
				return distuv.Beta{Alpha: 20, Beta: 1, Src: src}.Rand()
			case u < 0.8:
				return distuv.Beta{Alpha: 1, Beta: 20, Src: src}.Rand()
			default:
				return 0.2 + 0.6*r.Float64()
			}
		}}, cases: 150, baseRuns: 10, delta: 0.05, alpha: 0.05},
		// A baseline without per-case means and different case sets on the two sides;
		// difficulty is triangular on [0, 1].
		{name: "unpaired-welch", pop: population{binary: true, mean: 0.5, difficulty: func(r *rand.Rand, _ rand.Source) float64 {
			return (r.Float64() + r.Float64()) / 2
		}}, cases: 200, baseRuns: 10, delta: 0.08, alpha: 0.05, unpaired: true},
		// 10 of 100 case ids renamed: the 90 matched cases are paired.
		{name: "renamed-10-of-100", pop: population{difficulty: beta(6, 4), binary: true},
			cases: 100, baseRuns: 30, delta: 0.05, alpha: 0.05, renamed: 10},
		// The current run covers only the 50 hardest of 100 cases.
		{name: "hardest-50-of-100", pop: population{difficulty: beta(6, 4), binary: true},
			cases: 100, baseRuns: 10, delta: 0.1, alpha: 0.05, hardest: 50},
		clustered, undeclared,
		// Variance-free data by chance: two binary cases, and ten easy cases with one run
		// on each side, where all differences are 0 with probability ≈ 0.13.
		{name: "two-cases", pop: population{difficulty: beta(6, 4), binary: true},
			cases: 2, baseRuns: 10, delta: 0.05, alpha: 0.05, runs: 10},
		{name: "ten-easy-1-run", pop: population{difficulty: fixed(0.95), binary: true},
			cases: 10, baseRuns: 1, delta: 0.05, alpha: 0.05, runs: 1},
		// Five cases whose change is uneven: the regression scales each case's mean, and
		// one case is nearly always wrong, so it barely moves.
		{name: "uneven-5-cases", pop: population{binary: true, cycle: []float64{0.9, 0.8, 0.85, 0.75, 0.05}},
			cases: 5, baseRuns: 200, delta: 0.1, alpha: 0.05, fewCases: true},
		// A deterministic system identical to its baseline: every run of a case scores the
		// same on both sides, 30 cases × 3 runs. It must pass, by maxRegression.
		{name: "deterministic", pop: population{binary: true, difficulty: flips(0)},
			cases: 30, baseRuns: 3, delta: 0.05, alpha: 0.05, runs: 3, deterministic: true},
		// Nearly deterministic: each run flips a case's answer with probability 0.01–0.05.
		{name: "flip-0.01", pop: population{binary: true, difficulty: flips(0.01)},
			cases: 30, baseRuns: 3, delta: 0.05, alpha: 0.05, runs: 3},
		{name: "flip-0.02", pop: population{binary: true, difficulty: flips(0.02)},
			cases: 30, baseRuns: 3, delta: 0.05, alpha: 0.05, runs: 3},
		{name: "flip-0.05", pop: population{binary: true, difficulty: flips(0.05)},
			cases: 30, baseRuns: 3, delta: 0.05, alpha: 0.05, runs: 3},
	}
}

// flips draws cases of a nearly deterministic system: 80% of the cases answer right and
// the others wrong, and each run flips the answer with probability f.
func flips(f float64) func(*rand.Rand, rand.Source) float64 {
	return func(r *rand.Rand, _ rand.Source) float64 {
		if r.Float64() < 0.8 {
			return 1 - f
		}
		return f
	}
}

type simulator struct {
	sc  scenario
	src *rand.PCG
	r   *rand.Rand
	// The baseline's cases and the current run's cases, with their true means.
	baseIDs, curIDs []string
	baseMus, curMus []float64
	groups          map[string]string
	group           []int // the group of the case at each position, when the scenario has groups
	// mean is the true mean the regression is relative to: the compared cases', or the
	// population's when case sets are drawn afresh.
	mean float64
	bufs [2][][]float64
}

func newSimulator(sc scenario, seed uint64) *simulator {
	src := rand.NewPCG(seed, 0x5eed)
	s := &simulator{sc: sc, src: src, r: rand.New(src)}
	s.baseIDs = make([]string, sc.cases)
	for i := range s.baseIDs {
		s.baseIDs[i] = fmt.Sprintf("c%04d", i)
	}
	s.baseMus = s.drawCases()
	s.curIDs, s.curMus = slices.Clone(s.baseIDs), slices.Clone(s.baseMus)
	compared := s.baseMus
	switch {
	case sc.renamed > 0:
		for i := range sc.renamed {
			s.curIDs[i] = fmt.Sprintf("n%04d", i)
			s.curMus[i] = sc.pop.difficulty(s.r, s.src)
		}
		compared = s.baseMus[sc.renamed:]
	case sc.hardest > 0:
		idx := make([]int, sc.cases)
		for i := range idx {
			idx[i] = i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(s.baseMus[a], s.baseMus[b]) })
		idx = idx[:sc.hardest]
		slices.Sort(idx)
		s.curIDs, s.curMus = nil, nil
		for _, i := range idx {
			s.curIDs = append(s.curIDs, s.baseIDs[i])
			s.curMus = append(s.curMus, s.baseMus[i])
		}
		compared = s.curMus
	}
	for _, mu := range compared {
		s.mean += mu
	}
	s.mean /= float64(len(compared))
	if sc.unpaired {
		s.mean = sc.pop.mean
	}
	if sc.groups > 0 {
		s.group = groupLayout(sc.cases, sc.groups, sc.dominant)
	}
	if sc.groups > 0 && sc.declared {
		s.groups = map[string]string{}
		for i, id := range s.baseIDs {
			s.groups[id] = fmt.Sprintf("g%d", s.group[i])
		}
	}
	return s
}

// groupLayout assigns n consecutive cases to g groups: equal sizes (±1), or the first
// group holding the share dominant of the cases and the others splitting the rest.
func groupLayout(n, g int, dominant float64) []int {
	out := make([]int, n)
	first := 0
	if dominant > 0 {
		first = int(math.Round(dominant * float64(n)))
		for i := range first {
			out[i] = 0
		}
	}
	rest, groups, offset := n-first, g, 0
	if first > 0 {
		groups, offset = g-1, 1
	}
	for i := range rest {
		out[first+i] = offset + i*groups/rest
	}
	return out
}

func (s *simulator) drawCases() []float64 {
	mus := make([]float64, s.sc.cases)
	for i := range mus {
		if c := s.sc.pop.cycle; c != nil {
			mus[i] = c[i%len(c)]
			continue
		}
		mus[i] = s.sc.pop.difficulty(s.r, s.src)
	}
	return mus
}

// stats samples runs of every case whose true means are mus scaled by (1−shrink): a
// regression that hits every case in proportion to how often it was right.
func (s *simulator) stats(side int, ids []string, mus []float64, runs int, shrink float64) eval.MetricStats {
	buf := s.bufs[side]
	if len(buf) != len(mus) || len(buf[0]) != runs {
		buf = make([][]float64, len(mus))
		for i := range buf {
			buf[i] = make([]float64, runs)
		}
		s.bufs[side] = buf
	}
	var shared []float64 // one standard normal per group and run
	if s.sc.groups > 0 {
		shared = make([]float64, s.sc.groups*runs)
		for i := range shared {
			shared[i] = s.r.NormFloat64()
		}
	}
	sr, sn := math.Sqrt(s.sc.rho), math.Sqrt(1-s.sc.rho)
	// A binary baseline of hundreds of runs is summarised from its counts of successes,
	// as NewMetricStats would from the scores (laying out and reading 200 scores per case
	// is most of the cost of the five-case scenario under -race).
	var counts []int
	if s.sc.pop.binary && shared == nil && runs > 50 {
		counts = make([]int, len(mus))
	}
	for i, mu := range mus {
		mu *= 1 - shrink
		row := buf[i]
		if shared != nil {
			// Correlated runs: u = Φ(z) is uniform on [0, 1] with a Gaussian copula shared
			// by the cases of one group in one run; a binary score is u < μ, that is z < Φ⁻¹(μ).
			g := s.group[i]
			a := min(mu, 1-mu)
			q := distuv.UnitNormal.Quantile(min(max(mu, 0), 1))
			for k := range row {
				z := sr*shared[g*runs+k] + sn*s.r.NormFloat64()
				if s.sc.pop.binary {
					row[k] = 0
					if z < q {
						row[k] = 1
					}
				} else {
					row[k] = mu + a*(2*(0.5*math.Erfc(-z/math.Sqrt2))-1)
				}
			}
			continue
		}
		if s.sc.pop.binary {
			// One uniform per case: invert the binomial CDF, then lay out the successes.
			// Inversion costs O(runs); a baseline of hundreds of runs draws directly.
			if counts != nil {
				counts[i] = int(distuv.Binomial{N: float64(runs), P: mu, Src: s.src}.Rand())
				continue
			}
			k := binomial(s.r.Float64(), runs, mu)
			for j := range row {
				row[j] = 0
				if j < k {
					row[j] = 1
				}
			}
			continue
		}
		a := min(mu, 1-mu)
		for j := range row {
			row[j] = mu + a*(2*s.r.Float64()-1)
		}
	}
	var st eval.MetricStats
	if counts != nil {
		st = countStats(ids, counts, runs)
	} else {
		var err error
		if st, err = eval.NewMetricStats(ids, buf); err != nil {
			panic(err)
		}
	}
	if s.groups != nil {
		st.Groups = make(map[string]string, len(ids))
		for _, id := range ids {
			st.Groups[id] = s.groups[id]
		}
	}
	return st
}

// countStats is NewMetricStats for binary scores given as counts of successes: case
// i scored 1 on counts[i] of its runs. Its sample variance is k(R − k)/(R(R − 1)).
func countStats(ids []string, counts []int, runs int) eval.MetricStats {
	st := eval.MetricStats{Runs: runs, Cases: len(ids), CaseMeans: make(map[string]float64, len(ids))}
	r := float64(runs)
	means := make([]float64, len(ids))
	var within float64
	for i, k := range counts {
		kf := float64(k)
		means[i] = kf / r
		st.CaseMeans[ids[i]] = means[i]
		within += kf * (r - kf) / (r * (r - 1))
	}
	st.WithinCaseVariance = within / float64(len(ids))
	m, v := stat.MeanVariance(means, nil)
	if len(means) < 2 {
		v = 0
	}
	st.Mean, st.StdDev = m, math.Sqrt(max(0, v))
	st.StdErr = st.StdDev / math.Sqrt(float64(len(ids)))
	return st
}

// binomial returns the smallest k with P(X ≤ k) ≥ u for X ~ Binomial(n, p).
func binomial(u float64, n int, p float64) int {
	if p <= 0 {
		return 0
	}
	if p >= 1 {
		return n
	}
	q := 1.0 // P(X = 0) = (1−p)^n, by multiplication: n is small and math.Pow is slow under -race
	for range n {
		q *= 1 - p
	}
	cdf := q
	for k := 0; k < n; k++ {
		if u <= cdf {
			return k
		}
		q *= float64(n-k) / float64(k+1) * p / (1 - p)
		cdf += q
	}
	return n
}

// pair simulates a baseline and a current run whose true mean is lower by regression.
func (s *simulator) pair(runs int, regression float64) (cur, base eval.MetricStats) {
	baseMus, curMus := s.baseMus, s.curMus
	if s.sc.unpaired {
		baseMus, curMus = s.drawCases(), s.drawCases()
	}
	base = s.stats(0, s.baseIDs, baseMus, s.sc.baseRuns, 0)
	if s.sc.unpaired {
		base.CaseMeans = nil // no per-case means: the gate must compare unpaired
	}
	cur = s.stats(1, s.curIDs, curMus, runs, regression/s.mean)
	return cur, base
}

func (s *simulator) gate(runs int, regression float64) eval.ThresholdResult {
	cur, base := s.pair(runs, regression)
	rep, err := eval.Gate(
		[]eval.Threshold{{Metric: "m", MaxRegression: s.sc.delta, Alpha: s.sc.alpha}},
		map[string]eval.MetricStats{"m": cur},
		&eval.Baseline{Metrics: map[string]eval.MetricStats{"m": base}},
	)
	if err != nil {
		panic(err)
	}
	return rep.Results[0]
}

type rates struct{ pass, regression, inconclusive float64 }

func (r rates) String() string {
	return fmt.Sprintf("pass %.3f, regression %.3f, inconclusive %.3f", r.pass, r.regression, r.inconclusive)
}

func (s *simulator) rates(n, runs int, regression float64) rates {
	var out rates
	for range n {
		switch s.gate(runs, regression).Verdict {
		case eval.Pass:
			out.pass++
		case eval.Regression:
			out.regression++
		default:
			out.inconclusive++
		}
	}
	out.pass /= float64(n)
	out.regression /= float64(n)
	out.inconclusive /= float64(n)
	return out
}

// recommendedRuns is the median of the RunsNeeded that the gate reports on pilot runs
// with 2 runs per case drawn from the same truth: the advice a user would follow. It
// also returns the share of pilots that said no number of runs suffices.
func (s *simulator) recommendedRuns(pilots int, regression float64) (int, float64) {
	ks := make([]int, 0, pilots)
	none := 0
	for range pilots {
		k := s.gate(2, regression).RunsNeeded
		if k == 0 {
			k = math.MaxInt32
			none++
		}
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks[len(ks)/2], float64(none) / float64(pilots)
}

// tolerance is three binomial standard errors of a rate p estimated from n trials.
func tolerance(p float64, n int) float64 { return 3 * math.Sqrt(p*(1-p)/float64(n)) }

// figures is what one calibration scenario measured.
type figures struct {
	ran                       bool
	k0, k2                    int
	noRuns                    float64 // share of pilots advising that no number of runs suffices
	cases                     int     // the cases the gates were run with, when the advice was more cases
	null, edge, power, silent rates
}

// gatesPerFigure is the number of simulated gates behind every rate in the tables:
// 2,000 with AID_CALIBRATION=full, and 800 by default, so that the package's tests stay
// quick under -race while a miscalibration of the size the gate has had (CR1's 0.11–0.30
// at the boundary, a deterministic system always inconclusive, runs advised where they
// cannot reach the MDE) still fails them.
func gatesPerFigure() int {
	if calibrationFull() {
		return 2000
	}
	return 800
}

func TestCalibration(t *testing.T) {
	t.Parallel()
	n, pilots := gatesPerFigure(), 25
	scenarios := calibrationScenarios()
	got := make([]figures, len(scenarios))
	t.Run("scenarios", func(t *testing.T) {
		for i, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				s := newSimulator(sc, uint64(100+i))
				f := &got[i]
				tol := tolerance(sc.alpha, n)

				var follow []followed // the advice of each pilot, when the scenario follows it
				switch {
				case sc.fewCases:
					// Pilots at 2 runs with a true regression of 2δ: runs cannot reach the MDE
					// here, so the advice should be more cases. Every figure follows each
					// pilot's own advice, runs or cases, for an equal share of its gates.
					var cases []int
					advisedRuns := 0
					for p := range 4 * pilots {
						r := s.gate(2, 2*sc.delta)
						switch {
						case r.RunsNeeded > 0:
							advisedRuns++
							follow = append(follow, followed{s, r.RunsNeeded})
							continue
						case r.Verdict != eval.Inconclusive:
							follow = append(follow, followed{s, 2}) // nothing to follow
							continue
						case !strings.Contains(r.Advice, fmt.Sprintf("use at least %d cases", r.CasesNeeded)):
							t.Errorf("advice %q does not name the %d cases needed", r.Advice, r.CasesNeeded)
						case r.CasesNeeded > 5000:
							t.Fatalf("a pilot advises %d cases; the scenario should be feasible with more cases", r.CasesNeeded)
						}
						more := sc
						more.cases = r.CasesNeeded
						follow = append(follow, followed{newSimulator(more, uint64(1000*i+p)), 2})
						cases = append(cases, r.CasesNeeded)
					}
					f.noRuns = 1 - float64(advisedRuns)/float64(len(follow))
					if advisedRuns > 0 {
						t.Errorf("%d of %d pilots advise more runs, which cannot reach the MDE here; want none", advisedRuns, len(follow))
					}
					slices.Sort(cases)
					f.cases = cases[len(cases)/2]
					f.k0, f.k2 = 2, 2
				case sc.runs > 0:
					f.k0, f.k2 = sc.runs, sc.runs
				default:
					f.k0, f.noRuns = s.recommendedRuns(pilots, 0)
					if f.k0 > 100 {
						t.Fatalf("no-change pilots recommend %d runs; the scenario should be feasible", f.k0)
					}
				}
				rate := func(runs int, regression float64) rates {
					if follow == nil {
						return s.rates(n, runs, regression)
					}
					return followRates(n, follow, regression)
				}
				f.null = rate(f.k0, 0)
				t.Logf("no change, %d runs: %v", f.k0, f.null)
				if f.null.regression > sc.alpha+tol {
					t.Errorf("false-alarm rate %.4f > alpha %.2f + %.4f", f.null.regression, sc.alpha, tol)
				}
				if sc.deterministic && f.null.pass < 1 {
					t.Errorf("a deterministic system identical to its baseline passes %.3f of the time, want always", f.null.pass)
				}
				// A gate that calls most no-change runs inconclusive would be useless.
				if sc.runs == 0 && f.null.inconclusive > 0.10 {
					t.Errorf("no-change runs at the recommended runs are inconclusive %.3f of the time, want ≤ 0.10", f.null.inconclusive)
				}

				// The sharpest calibration point: a true regression of exactly maxRegression
				// is the boundary of the null hypothesis, where the false-alarm rate should be
				// alpha itself. Each scenario is held to 4 binomial SEs here (several
				// scenarios are checked); the pooled rate below is held to 3.
				f.edge = rate(f.k0, sc.delta)
				t.Logf("regression = maxRegression, %d runs: %v", f.k0, f.edge)
				switch lim := sc.alpha + tol*4/3; {
				case sc.showsProblem && f.edge.regression <= sc.alpha+tol:
					t.Errorf("undeclared groups: boundary rate %.4f is within alpha; the scenario no longer shows why groups matter", f.edge.regression)
				case !sc.showsProblem && f.edge.regression > lim:
					t.Errorf("rate of failing a regression of exactly maxRegression %.4f > %.4f", f.edge.regression, lim)
				}

				if sc.runs == 0 {
					if !sc.fewCases {
						f.k2, _ = s.recommendedRuns(pilots, 2*sc.delta)
						if f.k2 > 100 {
							t.Fatalf("pilots with a regression of 2×maxRegression recommend %d runs; the scenario should be feasible", f.k2)
						}
					}
					f.power = rate(f.k2, 2*sc.delta)
					t.Logf("regression = 2×maxRegression, %d runs (recommended): %v", f.k2, f.power)
					if !sc.showsProblem && f.power.regression < 0.8 {
						t.Errorf("power %.3f following the advice (%d runs) < 0.80", f.power.regression, f.k2)
					}
				}

				// Too few runs: the gate must say inconclusive rather than pass a regression.
				silentRuns := 1
				if sc.runs > 0 {
					silentRuns = sc.runs
				}
				f.silent = s.rates(n, silentRuns, 2*sc.delta)
				t.Logf("regression = 2×maxRegression, %d run(s): %v", silentRuns, f.silent)
				if f.silent.pass > 0.05 {
					t.Errorf("an underpowered gate passes a regression of 2×maxRegression %.3f of the time, want ≤ 0.05", f.silent.pass)
				}
				f.ran = true
			})
		}
	})
	if slices.ContainsFunc(got, func(f figures) bool { return !f.ran }) {
		return // a scenario did not run (-run selected one) or failed early
	}
	var pooled float64
	var calibrated int
	t.Logf("%d gates per rate; α = 0.05; k = runs per case (recommended by pilots unless fixed)", n)
	t.Logf("%-19s %5s %4s %11s %11s %9s %11s %4s %8s %11s %11s", "scenario", "cases", "k", "null alarm", "null inconc", "no-runs", "R=δ alarm", "k", "R=2δ pow", "silent k", "silent pass")
	for i, f := range got {
		sc := scenarios[i]
		if !sc.showsProblem {
			pooled += f.edge.regression
			calibrated++
		}
		power := "-"
		k2 := "-"
		if sc.runs == 0 {
			power, k2 = fmt.Sprintf("%.3f", f.power.regression), fmt.Sprint(f.k2)
		}
		silentK := 1
		if sc.runs > 0 {
			silentK = sc.runs
		}
		cases := sc.cases
		if f.cases > 0 {
			cases = f.cases
		}
		t.Logf("%-19s %5d %4d %11.4f %11.3f %9.2f %11.4f %4s %8s %11d %11.4f", sc.name, cases, f.k0, f.null.regression, f.null.inconclusive, f.noRuns,
			f.edge.regression, k2, power, silentK, f.silent.pass)
	}
	pooled /= float64(calibrated)
	alpha := scenarios[0].alpha
	tol := tolerance(alpha, n*calibrated)
	t.Logf("regression = maxRegression, pooled over %d calibrated scenarios: false alarms %.4f", calibrated, pooled)
	if pooled > alpha+tol {
		t.Errorf("pooled rate of failing a regression of exactly maxRegression %.4f > alpha %.2f + %.4f", pooled, alpha, tol)
	}
}

// TestHolmCalibration gates three independent metrics that all sit on the boundary of
// the null (true regression = maxRegression). Without a correction, some threshold would
// fail about 1−(1−α)³ ≈ 14% of the time; Holm's correction must hold the family-wise
// rate at alpha.
func TestHolmCalibration(t *testing.T) {
	t.Parallel()
	n := gatesPerFigure()
	sc := calibrationScenarios()[0]
	sc.cases = 100
	sims := []*simulator{newSimulator(sc, 11), newSimulator(sc, 12), newSimulator(sc, 13)}
	names := []string{"a", "b", "c"}
	const runs = 5
	var family, uncorrected float64
	for range n {
		cur := map[string]eval.MetricStats{}
		base := &eval.Baseline{Metrics: map[string]eval.MetricStats{}}
		var ths []eval.Threshold
		for j, s := range sims {
			c, b := s.pair(runs, sc.delta)
			cur[names[j]], base.Metrics[names[j]] = c, b
			ths = append(ths, eval.Threshold{Metric: names[j], MaxRegression: sc.delta, Alpha: sc.alpha})
		}
		rep, err := eval.Gate(ths, cur, base)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict == eval.Regression {
			family++
		}
		if slices.ContainsFunc(rep.Results, func(r eval.ThresholdResult) bool { return r.PValue <= sc.alpha }) {
			uncorrected++
		}
	}
	family /= float64(n)
	uncorrected /= float64(n)
	tol := tolerance(sc.alpha, n)
	t.Logf("3 metrics at the boundary, %d gates: family-wise false alarms %.4f with Holm, %.4f uncorrected", n, family, uncorrected)
	if family > sc.alpha+tol {
		t.Errorf("family-wise false-alarm rate %.4f > alpha %.2f + %.4f", family, sc.alpha, tol)
	}
	if uncorrected <= sc.alpha+tol {
		t.Errorf("uncorrected rate %.4f does not exceed alpha: the simulation cannot show what Holm's correction does", uncorrected)
	}
}

// TestNaiveTestIsMiscalibrated shows why cases are clusters: the floor test that treats
// every run as an independent Bernoulli trial and pools cases into one proportion
// misjudges the noise of a dataset whose cases differ in difficulty, while the gate's
// test on per-case means holds its rate. It guards against "simplifying" the gate back.
func TestNaiveTestIsMiscalibrated(t *testing.T) {
	t.Parallel()
	n := gatesPerFigure()
	sc := calibrationScenarios()[3] // independent case sets, strong case-to-case spread
	sc.cases = 100
	s := newSimulator(sc, 21)
	const runs = 10
	z := distuv.UnitNormal.Quantile(1 - sc.alpha)
	var naive, gate float64
	for range n {
		cur, base := s.pair(runs, sc.delta)
		// Naive: pooled binomial SE of each side's mean over cases × runs.
		se := math.Sqrt(cur.Mean*(1-cur.Mean)/float64(cur.Cases*runs) + base.Mean*(1-base.Mean)/float64(base.Cases*base.Runs))
		if (base.Mean-cur.Mean-sc.delta)/se > z {
			naive++
		}
		rep, err := eval.Gate([]eval.Threshold{{Metric: "m", MaxRegression: sc.delta, Alpha: sc.alpha}},
			map[string]eval.MetricStats{"m": cur}, &eval.Baseline{Metrics: map[string]eval.MetricStats{"m": base}})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Verdict == eval.Regression {
			gate++
		}
	}
	naive /= float64(n)
	gate /= float64(n)
	tol := tolerance(sc.alpha, n)
	t.Logf("regression = maxRegression, different case sets: false alarms %.4f naive, %.4f gate", naive, gate)
	if gate > sc.alpha+tol {
		t.Errorf("gate false-alarm rate %.4f > alpha + %.4f", gate, tol)
	}
	if naive <= sc.alpha+tol {
		t.Errorf("naive rate %.4f is within alpha: the scenario no longer shows the clustering problem", naive)
	}
}

// TestCountStats checks the simulator's shortcut against NewMetricStats.
func TestCountStats(t *testing.T) {
	ids := []string{"a", "b", "c"}
	counts := []int{0, 37, 60}
	rows := make([][]float64, len(ids))
	for i, k := range counts {
		rows[i] = make([]float64, 60)
		for j := range k {
			rows[i][j] = 1
		}
	}
	want, err := eval.NewMetricStats(ids, rows)
	if err != nil {
		t.Fatal(err)
	}
	got := countStats(ids, counts, 60)
	for _, f := range []struct {
		name string
		a, b float64
	}{{"mean", got.Mean, want.Mean}, {"stdDev", got.StdDev, want.StdDev}, {"stdErr", got.StdErr, want.StdErr}, {"within", got.WithinCaseVariance, want.WithinCaseVariance}, {"b", got.CaseMeans["b"], want.CaseMeans["b"]}} {
		if math.Abs(f.a-f.b) > 1e-12 {
			t.Errorf("%s: %v, NewMetricStats %v", f.name, f.a, f.b)
		}
	}
}
