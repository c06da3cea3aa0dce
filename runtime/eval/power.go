package eval

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// groupDesign is a clustered comparison's variance components, the model the grouped
// advice plans with. The paired difference of case i in group g is
//
//	d_i = Δ + u_g + v_i + e_i,
//
// u_g the change the cases of group g share (variance Between), v_i a case's own change
// within its group (variance Within), e_i the runs' noise (variance Wc/Kc + Wb/Kb, a
// run's variance of each side over its runs). Runs shrink only e_i: with a group effect,
// Var(d̄) = Between·Σn_g²/n² + (Within + Wc/Kc + Wb/Kb)/n has a floor that no number of
// runs lowers, and only more groups do.
type groupDesign struct {
	Sizes   []float64 // the groups' numbers of cases
	Between float64   // variance of a group's shared change
	Within  float64   // variance of a case's own change within its group
	Wc, Wb  float64   // run-to-run variance of one run, current run and baseline
	Kb      float64   // the baseline's runs
	// Fixed is a share of Var(d̄) that neither runs nor groups shrink: a calibrated
	// judge's own uncertainty.
	Fixed float64
}

// scaled returns the design with every variance multiplied by f: a calibrated judge's
// correction divides the differences by its Youden index J, so f = 1/J².
func (d groupDesign) scaled(f float64) groupDesign {
	d.Between, d.Within, d.Wc, d.Wb, d.Fixed = d.Between*f, d.Within*f, d.Wc*f, d.Wb*f, d.Fixed*f
	return d
}

// errNoDesign is returned by a plan whose design cannot be used: a variance that is not
// a finite number at least 0, fewer than 2 groups, or a group without cases.
var errNoDesign = errors.New("the variance components are not finite numbers at least 0, or fewer than 2 groups have cases")

// check reports whether the design can be planned with.
func (d groupDesign) check() error {
	if len(d.Sizes) < 2 {
		return errNoDesign
	}
	for _, m := range d.Sizes {
		if !(m >= 1) || !finite(m) {
			return errNoDesign
		}
	}
	for _, v := range []float64{d.Between, d.Within, d.Wc, d.Wb, d.Fixed} {
		if !(v >= 0) || !finite(v) {
			return errNoDesign
		}
	}
	if !(d.Kb >= 1) || !finite(d.Kb) {
		return errNoDesign
	}
	return nil
}

// moments returns, for groups of the given sizes and a run-noise variance noise per case,
// the variance of the mean difference, the ratio of the CR2 variance's expectation to it
// and the Bell–McCaffrey degrees of freedom, both under the working model (equicorrelated
// cases within a group, correlation ρ = Between/(Between + Within + noise)).
//
// With p_g = n_g/n, q_g = n_g(1 − ρ + ρn_g) and Q = Σ q_g, the CR2 variance's expectation
// is σ²/n² · Σ_g (q_g(1 − 2p_g) + p_g²Q)/(1 − p_g) and Var(d̄) = σ²Q/n²: CR2 is exactly
// unbiased for equal sizes, not for a group that holds most cases.
func (d groupDesign) moments(sizes []float64, noise float64) (variance, bias, df float64) {
	total := d.Between + d.Within + noise
	var n, sq float64
	for _, m := range sizes {
		n += m
		sq += m * m
	}
	variance = d.Between*sq/(n*n) + (d.Within+noise)/n + d.Fixed
	if !(total > 0) {
		return variance, 1, float64(len(sizes) - 1)
	}
	rho := d.Between / total
	var Q float64
	for _, m := range sizes {
		Q += m * (1 - rho + rho*m)
	}
	var ev float64
	for _, m := range sizes {
		p := m / n
		q := m * (1 - rho + rho*m)
		ev += (q*(1-2*p) + p*p*Q) / (1 - p)
	}
	// The judge's share is no part of the CR2 variance: it is added to it unchanged.
	clustered := variance - d.Fixed
	bias = (clustered*ev/Q + d.Fixed) / variance
	return variance, bias, bellMcCaffreyDF(sizes, rho)
}

// power returns the probability that the gate's CR2 test at level alpha fails a true
// regression of allowance + excess, for groups of the given sizes and a run-noise
// variance noise per case: the CR2 variance V is about E[V]·χ²_ν/ν with ν the
// Bell–McCaffrey degrees of freedom, so the statistic (d̄ − allowance)/√V is a
// noncentral t with ν degrees of freedom and noncentrality excess/√Var(d̄), scaled by
// √(Var(d̄)/E[V]); the test rejects beyond t_{1−α, ν}.
func (d groupDesign) power(sizes []float64, noise, excess, alpha float64) float64 {
	variance, bias, df := d.moments(sizes, noise)
	df = max(df, 0.5) // the t quantile and the noncentral t need ν > 0; ν < 1 has no power anyway
	if !(variance > 0) {
		return 1 // nothing varies: the test sees any excess
	}
	crit := tQuantile(1-alpha, df) * math.Sqrt(bias)
	p := 1 - distuv.NoncentralT{Nu: df, Mu: excess / math.Sqrt(variance)}.CDF(crit)
	if !(p >= 0) {
		return 0
	}
	return min(1, p)
}

// maxPlannedRuns is the most runs per case a plan advises: beyond it, the advice is
// more groups.
const maxPlannedRuns = 10000

// runsToPower returns the smallest number of runs K ≤ maxPlannedRuns at which the power
// at a true excess regression of excess reaches GatePower, when the current run has K
// runs and the baseline keeps its own (newBaseline false) or is also regenerated with K
// runs; 0 when none does, with the power that infinitely many runs would reach.
func (d groupDesign) runsToPower(excess, alpha float64, newBaseline bool) (runs int, best float64) {
	noise := func(k float64) float64 {
		if newBaseline {
			return (d.Wc + d.Wb) / k
		}
		return d.Wc/k + d.Wb/d.Kb
	}
	at := func(k int) float64 { return d.power(d.Sizes, noise(float64(k)), excess, alpha) }
	limit := d.power(d.Sizes, noise(math.Inf(1)), excess, alpha)
	if limit < GatePower {
		return 0, limit
	}
	// Power rises with K (the noise falls faster than the degrees of freedom do).
	k, ok := smallestReaching(1, maxPlannedRuns, at)
	if !ok {
		return 0, limit
	}
	return k, at(k)
}

// smallestReaching returns the smallest k in [from, limit] with at(k) ≥ GatePower, for
// an at that rises with k: a doubling search brackets it and bisection finds it. ok is
// false when at(limit) falls short, and k is then limit.
func smallestReaching(from, limit int, at func(int) float64) (k int, ok bool) {
	lo, hi := from-1, from // at(lo) < GatePower, or lo below the range
	for at(hi) < GatePower {
		if hi >= limit {
			return limit, false
		}
		lo, hi = hi, min(2*hi, limit)
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if at(mid) >= GatePower {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}

// maxPlannedGroups bounds the groups a plan searches; a design that needs more is
// reported as needing at least that many.
const maxPlannedGroups = 1 << 20

// groupsToPower returns how many groups of the median size must be added, at the
// current runs (kc), for the power at a true excess regression of excess to reach
// GatePower, with the power reached. Adding groups lowers both the group floor
// Between·Σn_g²/n² and the share of the largest group, and raises the degrees of freedom.
func (d groupDesign) groupsToPower(kc, excess, alpha float64) (extra int, reached float64) {
	sorted := slices.Clone(d.Sizes)
	slices.Sort(sorted)
	typical := max(1, sorted[len(sorted)/2])
	noise := d.Wc/kc + d.Wb/d.Kb
	at := func(k int) float64 {
		grown := slices.Grow(slices.Clone(d.Sizes), k)
		for range k {
			grown = append(grown, typical)
		}
		return d.power(grown, noise, excess, alpha)
	}
	if p := at(0); p >= GatePower {
		return 0, p
	}
	k, _ := smallestReaching(1, maxPlannedGroups, at)
	return k, at(k)
}

// estimateDesign estimates the components of a clustered comparison from its one-way
// analysis of variance by group: ssb and ssw are the between- and within-group sums of
// squares of the differences, noise the runs' variance per case at the pilot's runs. The
// components are at their PlanningAssurance upper confidence limits, each from its own
// mean square: the within-group one on n − G degrees of freedom, the between-group one
// on Satterthwaite's for SSB under the point estimates. A plan made from a lucky low
// estimate of the group floor would otherwise advise runs that cannot reach it.
func estimateDesign(sizes []float64, ssb, ssw, wc, wb, kc, kb float64) (point, upper groupDesign, err error) {
	point = groupDesign{Sizes: sizes, Wc: wc, Wb: wb, Kb: kb}
	upper = point
	noise := wc/kc + wb/kb
	g := float64(len(sizes))
	var n, sq float64
	for _, m := range sizes {
		n += m
		sq += m * m
	}
	for _, v := range []float64{ssb, ssw, noise} {
		if !(v >= 0) || !finite(v) {
			return point, upper, errNoDesign
		}
	}
	if g < 2 || !(kc >= 1) || point.check() != nil {
		return point, upper, errNoDesign
	}
	spread := n - sq/n // E[SSB] = (G − 1)σ²_w + spread·σ²_b
	if n-g < 1 || !(spread > 0) {
		// Every group is one case: a group's change and a case's are one component.
		v := ssb / (g - 1)
		point.Within = excessVariance(v, noise, g-1)
		f := upperFactor(g-1, PlanningAssurance)
		upper.Within = max(point.Within, v*f-noise, noise*(f-1))
		return point, upper, nil
	}
	msw := ssw / (n - g)
	point.Within = excessVariance(msw, noise, n-g)
	point.Between = max(0, (ssb-(g-1)*msw)/spread)
	f := upperFactor(n-g, PlanningAssurance)
	upper.Within = max(point.Within, msw*f-noise, noise*(f-1))
	// Satterthwaite's degrees of freedom of SSB = dᵀAd, A = Z(D⁻¹ − 11ᵀ/n)Zᵀ, under
	// Ω = σ²_w I + σ²_b ZZᵀ: with c_g = n_g(σ²_w + σ²_b n_g), tr AΩ = Σc_g/n_g − Σc_g/n and
	// tr (AΩ)² = Σ(c_g/n_g)² − 2Σc_g²/(n_g n) + (Σc_g)²/n².
	var s1, s2, s3, sc float64
	for _, m := range sizes {
		c := m * (msw + point.Between*m)
		s1 += c / m
		s2 += (c / m) * (c / m)
		s3 += c * c / m
		sc += c
	}
	tr := s1 - sc/n
	tr2 := s2 - 2*s3/n + sc*sc/(n*n)
	dfb := g - 1
	if tr2 > 0 && tr > 0 {
		dfb = tr * tr / tr2
	}
	// As for the within-group part, the limit is at least the one the same data would
	// give if SSB were at the runs' noise: a quiet pilot must not rule out a group floor
	// that its noise could hide.
	fb := upperFactor(dfb, PlanningAssurance)
	upper.Between = max(0, (ssb*fb-(g-1)*msw)/spread, (g-1)*noise*(fb-1)/spread)
	return point, upper, nil
}

// planGrouped sets the runs and groups recommendation of a clustered comparison by
// inverting the test it will face: for a candidate number of runs K, the power at a true
// regression of 2×maxRegression of the CR2 test with its Bell–McCaffrey degrees of
// freedom at level alpha, computed from the variance components at their planning upper
// limits ([groupDesign.power]); RunsNeeded is the smallest K that reaches GatePower.
// When the group floor leaves no K that does, the advice says so and how many more
// groups, at the current runs, would.
func planGrouped(r *ThresholdResult, c comparison, alpha float64) {
	delta := r.Threshold.MaxRegression
	now := nRuns(int(c.kc))
	if c.designErr != nil || c.design.check() != nil {
		r.Advice = fmt.Sprintf("the variance components of the %d groups cannot be estimated, so no number of runs can be planned: add groups, or record cases without a group if their scores do not move together", c.clusters)
		return
	}
	d := c.design
	extra, groupPower := d.groupsToPower(c.kc, delta, alpha)
	sorted := slices.Clone(d.Sizes)
	slices.Sort(sorted)
	typical := int(max(1, sorted[len(sorted)/2]))
	r.GroupsNeeded = len(d.Sizes) + extra
	r.CasesNeeded = c.n + extra*typical
	// "add <groups>": with no group to add (the plan reaches the power at the current
	// groups and runs; the estimate of this run was unlucky), say so rather than "add 0".
	groups := fmt.Sprintf("nothing more: %d groups at %s already plan power %.2f", r.GroupsNeeded, now, groupPower)
	if extra > 0 {
		groups = fmt.Sprintf("%s of %s (%d groups, %d cases) at %s", plural(extra, "more group", "more groups"), plural(typical, "case", "cases"), r.GroupsNeeded, r.CasesNeeded, now)
	}
	if c.unbalanced() {
		groups += fmt.Sprintf(" (the largest group holds %.0f%% of the cases, so the test rests on %.1f degrees of freedom: add groups, not cases to it)",
			100*c.largest, c.df)
	}
	if c.withinUnknown {
		r.Advice = fmt.Sprintf("use at least 2 runs per case so that run-to-run noise can be told from case-to-case spread, or add %s", groups)
		return
	}
	var runsPower, bothPower float64
	r.RunsNeeded, runsPower = d.runsToPower(delta, alpha, false)
	r.RunsNeededNewBaseline, bothPower = d.runsToPower(delta, alpha, true)
	power := func(p float64) string {
		return fmt.Sprintf("planned power %.2f at a regression of 2×maxRegression", p)
	}
	mde := fmt.Sprintf("MDE now: %.4f; needed: ≤ %.4f", r.MDE, delta)
	// Runs cost no new cases, so they come first, unless the groups' sizes limit the test
	// and the groups cost fewer samples.
	groupsFirst := c.unbalanced() && extra > 0 && (r.RunsNeeded == 0 || r.CasesNeeded*int(c.kc) < r.RunsNeeded*c.n)
	switch {
	case groupsFirst && (r.RunsNeeded > 0 || r.RunsNeededNewBaseline > 0):
		r.PlannedPower = groupPower
		alt := fmt.Sprintf("run at least %s per case", nRuns(r.RunsNeeded))
		if r.RunsNeeded == 0 {
			alt = fmt.Sprintf("regenerate the baseline and run, both with at least %s per case", nRuns(r.RunsNeededNewBaseline))
		}
		r.Advice = fmt.Sprintf("add %s (%s; %s), or %s", groups, power(groupPower), mde, alt)
	case r.RunsNeeded > 0:
		r.PlannedPower = runsPower
		r.Advice = fmt.Sprintf("run at least %s per case (%s under the CR2 test; %s), or add %s", nRuns(r.RunsNeeded), power(runsPower), mde, groups)
	case r.RunsNeededNewBaseline > 0:
		r.PlannedPower = bothPower
		r.Advice = fmt.Sprintf("the baseline's own noise (%s per case) leaves no room: regenerate it and run, both with at least %s per case (%s; %s), or add %s",
			nRuns(int(c.kb)), nRuns(r.RunsNeededNewBaseline), power(bothPower), mde, groups)
	default:
		r.PlannedPower = groupPower
		_, _, df := d.moments(d.Sizes, 0)
		_, limit := d.runsToPower(delta, alpha, true)
		why := fmt.Sprintf("even unlimited runs leave the CR2 test, on %.1f degrees of freedom, a power of %.2f at a regression of 2×maxRegression", df, limit)
		if limit >= GatePower {
			why = fmt.Sprintf("more than %d runs per case would be needed", maxPlannedRuns)
		}
		r.Advice = fmt.Sprintf("no number of runs suffices: runs do not average out the change's spread between groups (variance %.2g, %.2g at its %g%% upper limit) and between the cases of a group (%.2g, %.2g), and %s; add %s (%s), or raise maxRegression above %.4f",
			c.point.Between, d.Between, 100*PlanningAssurance, c.point.Within, d.Within, why, groups, power(groupPower), r.MDE)
		if c.point.Between == 0 {
			// Nothing shows a group effect: only the runs' noise leaves room for one.
			r.Advice += fmt.Sprintf(" (nothing shows the groups' change to differ yet, but %s per case cannot rule it out; a run with more runs per case measures it more closely)", now)
		}
	}
}
