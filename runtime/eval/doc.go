// Package eval runs sampled evaluations and gates them against a committed baseline with
// a calibrated statistical test, so that CI fails on real regressions and passes real
// no-change runs at a known rate.
//
// It is for: loading versioned datasets ([LoadDataset]), scoring answers ([Metric]:
// [ExactMatch], [NormalizedContains], [JSONSchemaValid], [LLMJudge]), sampling every case
// several times through any [Runner] ([Run]), summarising per-case per-run scores
// ([MetricStats]), writing and diffing baselines ([Baseline]), and deciding each threshold
// ([Gate]). It is not a model client (a Runner or [JudgeModel] wraps one: the gateway, an
// agent, a fake), not a CLI, and it writes no file except through [WriteBaselineFile].
//
// # Sampling
//
// A model answers differently from run to run, so each case i = 1..n is run K times and
// every score s_ik ∈ [0, 1] is kept. A runner failure is recorded on its sample with its
// cause and scores 0 on every metric; a metric failure scores 0 on that metric. Both are
// counted in [MetricStats.Errors]. Scoring failures as 0 rather than dropping them is
// deliberate: a target that errors has not answered, and dropping its failures would make
// a flaky target look better than a reliable one.
//
// # Cases are clusters
//
// Runs of one case are correlated (a hard case is hard on every run), so N×K scores are
// not N×K independent observations (Miller, "Adding Error Bars to Evals", 2024). Each
// case's runs are averaged first, x̄_i = (1/K) Σ_k s_ik, and every mean and standard error
// is computed from the case means:
//
//	mean  = (1/n) Σ_i x̄_i
//	SE    = sd(x̄_i) / √n                    (clustered standard error)
//	ŵ     = (1/n) Σ_i var_k(s_ik)           (within-case variance, needs K ≥ 2)
//
// The spread of case means decomposes as Var(x̄_i) = τ² + σ²_w/K: the between-case part
// τ² does not shrink with more runs, the within-case part σ²_w/K does.
//
// # The test
//
// Let R be the true regression, baseline mean minus current mean, and δ = MaxRegression.
// A threshold must pass when the regression is within δ and fail when it exceeds δ beyond
// sampling noise, so the hypotheses are
//
//	H0: R ≤ δ   (an allowed change)        H1: R > δ   (a harmful regression)
//
// Every score must be a finite number in [0, 1]; [NewMetricStats], [NewBaseline],
// [MarshalBaseline], [ParseBaseline] and [Gate] refuse anything else with one validation,
// so a baseline the tool writes is one it can read. A drop equal to δ within
// [TieTolerance] counts as equal to δ (0.80 → 0.75 is 0.050000000000000044 in floating
// point), and the allowance is inclusive.
//
// Matched cases. The gate pairs the case ids present in both the baseline and the
// current run (the matched cases); ids only in the current run (added) or only in the
// baseline (removed) are not compared, and [ThresholdResult] lists them, with a Basis
// sentence saying what the verdict rests on. Each case is compared with itself, so a
// current run over a non-random subset (the hardest half) is not biased by the cases it
// left out. With fewer than 2 matched cases the threshold is Inconclusive. Only when a
// side has no per-case means at all (a baseline written by hand from summary figures)
// are the two means compared unpaired, with Welch's test, and Basis says so.
//
// Paired, over the n matched cases with d_i = b̄_i − x̄_i,
//
//	R̂ = d̄,   SE² = max( sd(d_i)²/n ,  (w̃_c/K_c + w̃_b/K_b)/n ),   df = n − 1.
//
// Pairing cancels the between-case variance τ², which is why per-case means are kept in
// baselines. The second term is the run-to-run floor: a per-case difference cannot vary
// less than the runs' own noise says it must, Var(d_i) ≥ σ²_c/K_c + σ²_b/K_b. With
// discrete scores all d_i can be equal by chance (ten easy binary cases at one run: all
// differences 0 with probability 0.13 under a true drop of 2δ), and reading that as
// certainty passed such drops with "upper bound 0". w̃ is a side's within-case variance
// ŵ when it has at least 2 runs that varied; a side with one run borrows the other's.
//
// A side whose runs never varied (a deterministic system) is bounded jointly over all
// its quiet case-sides, not case by case: if a case-side's K runs differ with
// probability π_j, the chance that none of m case-sides varied is Π(1 − π_j) ≤ (1 − π̄)^m,
// so with confidence [DeterminismAssurance] the mean π̄ is at most
//
//	π̄_U = 1 − (1 − DeterminismAssurance)^{1/m},
//
// and a score in [0, 1] whose K runs differ with probability π has a run-to-run variance
// of at most s_K·π, s_K = 1/(4(1 − 2^{1−K})) (s_2 = ½, s_3 = ⅓; tight for binary scores,
// whose runs differ with probability 1 − p^K − (1−p)^K). So w̃ ≤ s_K·π̄_U on average over
// the quiet case-sides (both sides together when both are quiet, m = 2n; with different
// K the larger s_K/K is charged to both). 30 cases × 3 runs that never varied on either
// side give π̄_U = 0.074 and w̃ = 0.025, SE = 0.023: a deterministic system identical to
// its baseline passes a maxRegression of 0.05 by its upper bound, where the bound below
// (SE 0.067) left it inconclusive. When neither side could measure anything (one run
// each), or the joint bound is looser, w̃ is the largest variance a [0, 1] metric allows
// at its case means, μ̃(1 − μ̃) averaged over the cases (Bhatia–Davis), with
// μ̃ = (K·x̄_i + ½)/(K + 1) shrunk by half a pseudo-run towards ½ so that a case that
// scored 1 on all K runs keeps the uncertainty K runs leave. The floor is conservative
// (it only raises SE), so α still holds; Basis says when it decided and whether the
// joint bound did.
//
// Clusters. Cases often come in groups (several questions on one document, paraphrases
// of one question) whose scores move together; treating them as independent
// underestimates SE (groups of 5 sharing run noise with correlation 0.5 gave 0.13 false
// alarms at α = 0.05). A dataset case may carry a group ([Case.Group], stored in
// baselines); when any matched case has one, SE is cluster-robust with the groups as
// clusters and cases without a group as their own cluster (Miller 2024; inspect_ai's
// stderr(cluster=…)). The estimator is CR2, the bias-reduced linearization of Bell and
// McCaffrey (2002), which for a mean is
//
//	e_i = d_i − d̄,   SE² = Σ_g (Σ_{i∈g} e_i)² / (1 − n_g/n) / n²,
//
// over the G clusters of n_g cases, exactly unbiased for independent cases of equal
// variance whatever the sizes. The degrees of freedom are Satterthwaite's for that
// variance under a working model in which the cases of a group are equicorrelated with
// the correlation ρ̂ of the residuals (clamped to [0, 1]; Imbens and Kolesár 2016,
// Pustejovsky and Tipton 2018):
//
//	df = (tr K)² / tr K²,   K = Gᵀ Ω̂ G,   G_g = (I − 11ᵀ/n) 1_g / (n √(1 − n_g/n)),
//
// computed in O(G) (a diagonal plus a rank-two matrix). They are G − 1 for equal sizes
// and fall towards 1 when one group dominates: with 60% of the cases in one group they
// are about 1.1–2.7 whatever G, which is the information such a layout holds. CR1
// (G/(G−1) instead of 1/(1 − n_g/n), df = G − 1) raised false alarms at the boundary of
// 0.11–0.30 against α = 0.05 when one group held 60% of the cases. The run-to-run floor
// is scaled by the design effect deff = max(1, SE²_CR2 / (sd(d_i)²/n)). A case's group
// is the current run's, else the baseline's. With fewer than [MinClusters] = 3 clusters
// the threshold is Inconclusive, and the advice names the groups to add: with two
// groups the variance rests on one degree of freedom or less, and CR1 passed a true
// regression of 2δ in up to 5% of gates.
//
// Unpaired (a side without per-case means): the two means are independent, with
// clustered standard errors, each floored at its run-to-run noise, and Welch's degrees
// of freedom,
//
//	R̂ = b̄ − x̄,   SE² = SE_b² + SE_c²,   df = SE⁴ / (SE_b⁴/(n_b−1) + SE_c⁴/(n_c−1)).
//
// In every case SE > 0 and
//
//	t = (R̂ − δ)/SE,   p = P(T_df ≥ t)   (one-sided, Student's t from gonum's distuv).
//
// Equivalently, with the paired mean difference d̄' = current − baseline = −R̂,
// t = −(d̄' + δ)/SE. A threshold regresses when its p-value, corrected by Holm's step-down
// procedure across the m thresholds of the gate that have a baseline,
//
//	p_(1) ≤ … ≤ p_(m),   p̃_(j) = max_{l ≤ j} min(1, (m − l + 1)·p_(l)),
//
// is at most α. (With equal alphas this is exactly Holm's procedure at level α; with
// different alphas each threshold compares its Holm-adjusted p-value with its own alpha.)
// This bounds the probability of any false regression verdict, when every true
// regression is within its δ, by α — whatever the number of runs and cases. The bound is
// tight at R = δ; at R = 0 (no change at all) the false-alarm rate is far below α. A
// p-value that is not a probability (a numerical failure) counts as 1 in Holm's
// procedure, so it can neither be significant nor change the others, and its threshold
// is Inconclusive: a threshold without a valid p never passes.
//
// # Power, the minimum detectable effect and the verdict
//
// A test that rarely fails because it has too little data would pass silently. So each
// tested threshold also reports
//
//	U   = R̂ + t_{1−α, df}·SE                       (upper (1−α) confidence bound of R)
//	MDE = (t_{1−α/m, df} + t_{0.8, df})·SE          (minimum detectable effect)
//
// A true regression of δ + MDE fails with probability about 80%; the MDE is computed at
// the Bonferroni level α/m, the level Holm uses for the first rejection, which is
// conservative. The gate is adequately powered when MDE ≤ δ, that is, when a regression
// of 2δ would be caught at least 80% of the time. The verdict is, in order:
//
//  1. Regression if FailBelow is set and the current mean is below it: a floor that
//     fails, whatever the baseline says (the reason keeps what the other rules found).
//  2. Pass if MinMean is set and the current mean is at least MinMean: it passes
//     outright.
//  3. Without a usable baseline: Regression if MinMean is set (the mean is below it),
//     otherwise Inconclusive.
//  4. Regression if p̃ ≤ α.
//  5. Pass if U ≤ δ: the data show the regression is within δ, whatever the power.
//  6. Pass if MDE ≤ δ: no significant regression, and a harmful one would have been seen.
//  7. Otherwise Inconclusive, with the MDE and what would be needed.
//
// FailBelow and MinMean compare the observed mean with a fixed value; they are business
// rules, not tests, so a mean within a few standard errors of either may fall on both
// sides from run to run. FailBelow is at most MinMean when both are set.
//
// A no-change run with low power is therefore Inconclusive (exit code 3), not Pass: with
// that little data it cannot be told apart from a regression of 2δ, and passing it is the
// silent pass the gate exists to prevent (unless its own upper bound already excludes a
// regression beyond δ, rule 5). At the recommended number of runs a no-change run is
// rarely inconclusive; the calibration tests require at most 10% and measure 0–2.4%. A CLI
// may map Inconclusive to pass or fail by flag.
//
// # How many runs
//
// From the variance decomposition, with ŵ_c and ŵ_b the within-case variances of the
// current run (K_c runs) and the baseline (K_b runs; a side with one run borrows the
// other's estimate, see the floor above):
//
//	paired:   τ̂² = var(d_i) − (ŵ_c/K_c + ŵ_b/K_b)            (spread of the true change)
//	          SE²(K) = deff·(τ̂² + ŵ_c/K + ŵ_b/K_b) / n
//	unpaired: τ̂_c² = var(x̄_i) − ŵ_c/K_c                       (spread of true case means)
//	          SE²(K) = (τ̂_c² + ŵ_c/K)/n_c + (τ̂_b² + ŵ_b/K_b)/n_b
//
// Each τ̂² is set to 0 unless the observed variance exceeds the run-to-run part
// significantly (one-sided χ² test at 5%): a difference of variance estimates is noisy,
// and noise alone must not make the plan claim that no number of runs can suffice. The
// test's degrees of freedom ν are n − 1, or with groups the Satterthwaite degrees of
// freedom of the sample variance under the clusters' working model,
// ν = (tr MΩ̂)²/tr (MΩ̂)², M = I − 11ᵀ/n (n − 1 for independent cases, G − 1 when the
// cases of equal groups move as one): the advice's variance test, like its power
// computation, uses the groups' information, not the cases' count.
//
// RunsNeeded is the smallest K with λ²·f·SE²(K) ≤ δ², λ = t_{1−α/m, df} + t_{0.8, df}
// with the test's own df (Bell–McCaffrey's with groups), where f = df/χ²_{0.2}(df) is the
// one-sided 80% upper confidence factor of a variance estimate (Browne, 1995): a plan
// made from a lucky low variance estimate would otherwise fall short of its power on the
// next run. When the baseline's own noise or the between-case part already exceeds the
// budget, no number of current runs suffices: RunsNeeded is 0, RunsNeededNewBaseline says
// how many runs both a regenerated baseline and the current run need, and when even that
// is 0, only more cases help (CasesNeeded, the number of cases at which the planned MDE
// reaches δ at the current runs).
//
// With groups, the advice inverts the test it plans for rather than scaling an MDE. The
// cases of a group may share their change, and runs cannot average that out: with the
// paired difference of case i in group g modelled as d_i = Δ + u_g + v_i + e_i,
//
//	Var(d̄; K) = σ²_b·Σ n_g²/n² + (σ²_v + ŵ_c/K + ŵ_b/K_b)/n,
//
// σ²_b the variance between groups, σ²_v between the cases of a group (a one-way
// analysis of variance of the differences by group), both at their 80% upper confidence
// limits (σ²_v on n − G degrees of freedom, σ²_b on Satterthwaite's for the between-group
// sum of squares, and neither below what the runs' own noise could hide). For a number of
// runs K the planned power at a true regression of 2δ is that of the CR2 test it will
// face: the CR2 variance is about E[V]·χ²_ν/ν with ν the Bell–McCaffrey degrees of
// freedom at the working correlation ρ(K) = σ²_b/(σ²_b + σ²_v + ŵ_c/K + ŵ_b/K_b) (which
// rises with K, so the degrees of freedom fall), so the statistic is a noncentral t with
// noncentrality δ/√Var(d̄; K), scaled by √(Var/E[V]) (CR2 is unbiased for equal groups,
// not for one that holds most cases), against t_{1−α/m, ν}. RunsNeeded is the smallest K
// at which that power reaches 0.8 (RunsNeededNewBaseline the same with the baseline
// regenerated at K runs; at most 10,000). Where σ²_b·Σn_g²/n² leaves no K that does, the
// advice says "no number of runs suffices", with the components and the power unlimited
// runs would leave, and how many groups of the median size, added at the current runs,
// would reach 0.8 (GroupsNeeded, CasesNeeded; PlannedPower is the power the advice's
// setting plans). Cases added to the existing groups do not lower the floor. From case
// means alone, noise that the cases of a group share within one run (which runs do
// average out) looks like a shared change, so the plan may ask for groups where more
// runs would have done; it never promises runs that cannot deliver. When the sizes
// rather than the number of groups limit the test (its df below half of G − 1, as when
// one group holds most cases) and the groups cost fewer samples than the runs, the advice
// leads with the groups and says that cases added to the largest group do not help. The
// planned power matches the simulated CR2 test within 0.02 (TestGroupPowerSimulated).
//
// Without groups, runs shrink only the run-to-run part; the spread of the change from
// case to case stays. With few cases that spread is barely estimated (five cases whose change is uneven got
// advice of 130–200 runs, at which the spread dominates the MDE and a true regression of
// 2δ failed only 32% of the time). So runs are advised only if, with τ² at its 80% upper
// confidence limit ([SpreadAssurance]), infinitely many runs would bring the MDE within
// δ, λ²·deff·τ²_U/n ≤ δ². The limit is the larger of what the observed variance allows
// and what the runs' own noise can hide,
//
//	τ²_U = max( var(d_i)·F − N,  N·(F − 1) ),   N = ŵ_c/K_c + ŵ_b/K_b,   F = ν/χ²_{0.2}(ν):
//
// the second term is the limit the same data would give if the change were even, so a
// lucky low variance cannot make the spread look measured when the runs' noise left no
// resolution to measure it (with only the first term, 17% of pilots over five uneven
// cases still advised runs that could never reach the MDE, and following them reached a
// power of 0.755; now every pilot advises cases). Otherwise RunsNeeded and
// RunsNeededNewBaseline are 0 and the advice says that more runs cannot be relied on and
// how many cases to use; when only the runs' own noise hides the spread (τ̂² = 0), it
// also says how many runs would show whether the spread is that large.
//
// # Calibration
//
// The test suite simulates complete gates from seeded populations and fails unless, with
// 2,000 simulated gates behind every rate (800 in a default go test, enough to fail
// every miscalibration the gate has had; AID_CALIBRATION=full runs 2,000): with no true change, at the runs the gate
// recommends, the false-alarm rate is at most α plus three binomial standard errors and
// at most 10% of runs are inconclusive; with a true regression of exactly δ, the boundary
// of H0 and the sharp test of calibration, the rate is again at most α (per scenario
// within 4 SEs, pooled over the scenarios within 3); with a true regression of 2δ at the
// runs the gate recommends, at least 80% fail; with 1 run per case, at most 5% of such
// regressions pass. The scenarios are binary accuracy, continuous scores, cases bimodal
// in difficulty, an explicit unpaired (Welch) comparison, 10 of 100 case ids renamed, a
// current run over the 50 hardest of 100 cases, 20 groups of 5 cases sharing run noise
// (declared, gated at 20 runs, and undeclared to show the problem), two binary cases, ten easy binary
// cases at one run on each side (where all differences are 0 with probability 0.13),
// five cases with an uneven change, where every pilot must advise more cases rather than
// runs and every figure follows each pilot's own advice (power at least 0.80), a
// deterministic system identical to its baseline (30 cases × 3 runs, every run equal on
// both sides), which must pass every time, and nearly deterministic ones whose runs flip
// a case's answer with probability 0.01, 0.02 and 0.05. Holm's correction holds three
// boundary metrics to α together where uncorrected tests exceed it; and a naive test
// that treats runs as independent trials exceeds α where the gate does not. "The runs the
// gate recommends" is the median RunsNeeded of pilot gates at 2 runs per case drawn from
// the same truth, which is what a user following the advice of an inconclusive run gets.
// go test -run Calibration -v prints the tables of measured rates;
//
//	AID_CALIBRATION=full go test -run Calibration -v -timeout 60m ./runtime/eval/
//
// prints them at 2,000 gates per rate, with the whole grid of groups below. Measured so
// (seeded): the deterministic system passes 1.000 of its gates; the nearly deterministic
// ones hold the boundary at 0.013, 0.017 and 0.027 and are inconclusive 25%, 30% and 56%
// of the time with no change (3 runs cannot show more); over five uneven cases every
// pilot advises cases, and following the advice fails a 2δ regression 0.968 of the time;
// the boundary rate pooled over the 14 calibrated scenarios is 0.0303.
//
// Grouped cases are calibrated over a grid: G = 3, 5, 10, 20 and 40 groups over 120
// cases, of equal sizes or with one group holding 60% of them, runs sharing noise within
// a group with intra-class correlation 0.1, 0.5 and 0.9, binary and continuous scores,
// maxRegression 0.1. In every cell the false-alarm rate at the boundary is at most α + 2
// Monte-Carlo standard errors (0.0597; measured at most 0.0495). A true regression of
// 2δ, gated by a pilot at 2 runs and, when that is inconclusive, by following its
// advice, passes at most 20% of the time (measured at most 0.103) and fails at least 80%
// of the time in 47 of the 60 cells; in the other 13 (few groups or one dominant group,
// binary scores, intra-class correlation 0.5 or 0.9) some pilots advise more cases than
// a simulation can follow, and those gates stay honestly inconclusive. Where every
// inconclusive pilot's advice is followed, following it fails at least 80% of the gates.
// (These advice figures were measured before the grouped advice planned the CR2 test's
// power, and have not been remeasured since; the boundary must hold at any runs.
// The advice is now checked by TestCalibrationAdvice, below.) Two groups are always
// inconclusive. The grid takes minutes, so by default only the
// boundary of two dominated cells where CR1 failed runs, at 5 runs and 800 gates (0.0225
// and 0.0112; CR1 at 2,000 gates: 0.175 and 0.285); the whole grid runs with
//
//	AID_CALIBRATION=full go test -run TestCalibrationGroups -v ./runtime/eval/
//
// The grouped advice is checked by following it (TestCalibrationAdvice): over G = 3, 5,
// 10, 20 and 40 groups of 120 binary cases, sized in proportion to 1…G or with one group
// holding 60% of them, a change that varies from case to case (standard deviation 0.05)
// with intra-class correlation 0.5, 0.7 and 0.9 between the cases of a group,
// maxRegression 0.05 and a baseline of 20 runs, each simulated user gates a pilot at 2
// runs and, when it is inconclusive, follows its advice: the runs it names, a
// regenerated baseline, or the groups it names at 2 runs. Measured at 2,000 followed
// users per figure (seeded): following the advice fails a 2δ regression 0.922–1.000 of
// the time in every one of the 30 cells (the lower end of the ±2 Monte-Carlo SE interval
// at least 0.911), and with no change the followed gates raise no false alarm (0.0000;
// at most 0.0011 over all users, pilots included). Every inconclusive pilot there advised
// groups (median 44–837 groups in all, 5 of 60,000 beyond what the simulation follows):
// at 2 binary runs the noise could hide a group floor that no number of runs passes, and
// the advice says so. The advice before it planned the CR2 test's power advised runs or
// a regenerated baseline in most skewed cells, and following it failed a 2δ regression
// only 0.670–0.950 of the time (100 users per figure). By default two cells run at 150
// users; the whole grid, with the table, runs with
//
//	AID_CALIBRATION=full go test -run TestCalibrationAdvice -v -timeout 60m ./runtime/eval/
//
// The guarantee is over the joint draw of the baseline and the current run. A committed
// baseline is one draw: conditional on it, the false-alarm rate of later runs varies with
// how lucky that draw was, which is another reason to record baselines with more runs
// than CI uses (the ŵ_b/K_b term).
//
// # Calibrated judges
//
// Model-derived metrics (an LLM judge) are summarised and may be stored in baselines, but
// a threshold on one is a [*GateConfigurationError] unless the judge is calibrated: its
// own errors would move the gate. A calibrated judge ([LLMJudge.Calibrated]) scores
// verdicts, 1 at [JudgeVerdictCut] and above, and its statistics carry a
// [JudgeCalibration] measured on answers people labelled ([MeasureJudge]): sensitivity
// Se (of the P items people passed, the share it passed) and specificity Sp (of the N
// they failed, the share it failed), each with a Wilson interval, and Youden's
// J = Se + Sp − 1 with the lower bound Se_L + Sp_L − 1. A set with fewer than
// [MinCalibrationLabels] of either label, or a judge with J ≤ 0, is refused.
//
// A judged pass rate p estimates Se·π + (1 − Sp)(1 − π), not the true rate π; Rogan and
// Gladen's (1978) correction π̂ = (p + Sp − 1)/J ([RoganGladen]) is linear in p with slope
// 1/J, so for a paired comparison the corrected regression is R̂/J and every variance
// component above scales by 1/J². The calibration's own error adds, by the delta method,
//
//	SE²_corrected = SE²/J² + (R̂/J)²·(Var(Ŝe) + Var(Ŝp))/J²,
//
// with the variances taken at the Agresti–Coull proportions ((x+2)/(n+4)) so that a judge
// that agreed on every item still carries its set's uncertainty; runs and cases cannot
// shrink that term, so the plan subtracts it before advising runs or cases and advises
// more labels when it alone exceeds the budget. Both sides must be corrected with the
// same calibration (a baseline keeps its counts); minMean and failBelow apply to the
// corrected mean. [JudgeCalibration.Correct] gives the corrected rate of a single run with
// the same variance, (Var(p) + π²Var(Ŝe) + (1−π)²Var(Ŝp))/J² (Greenland 1988), clamped to
// [0, 1]. Simulated with judges of known error (calibrate_test.go), the corrected rate's
// bias is within 0.003 where the raw rate's is 0.04–0.27, and the gate's false alarms at a
// true regression of maxRegression stay within α + 2 Monte-Carlo standard errors:
//
//	AID_CALIBRATION=full go test -run 'TestRoganGladenUnbiased|TestCalibratedJudgeGate' -v ./runtime/eval/
//
// # Pinned models
//
// A score means little without the model that produced it. Every model call made for a
// sample reports the model that answered with [RecordPin] ([ModelRunner] and
// [GatewayJudge] do), [Run] collects them into [Result.Pins] (role, alias, exact pinned
// id, provider; a fallback alias that answered is recorded as itself), and a baseline
// stores them. [CompareModels] lists how a run's models differ from the baseline's. It
// never changes a verdict: the gate still compares scores, and the report shows the
// change beside them, so that an alias re-pointed to a new version is never mistaken for
// noise. A baseline written before models were recorded has no pins, reads and rewrites
// to the same bytes, and compares as "not recorded" rather than as a change.
package eval
