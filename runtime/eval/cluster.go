package eval

import "math"

// MinClusters is the fewest groups a clustered comparison is made with. A cluster-robust
// standard error estimates the variance of a mean from the spread of the groups' sums:
// with two groups it rests on one degree of freedom or less, and the test it supports
// passed a true regression of 2×maxRegression in up to 5% of gates.
const MinClusters = 3

// clusterFit is the cluster-robust variance of the mean of the paired per-case
// differences (see the package documentation, "Clusters").
type clusterFit struct {
	g  int     // clusters
	v  float64 // CR2 variance of the mean
	df float64 // Bell–McCaffrey degrees of freedom under the working model
	// rho is the working model's intra-cluster correlation of the differences, estimated
	// from the residuals and clamped to [0, 1].
	rho float64
	// largest is the share of the cases in the largest cluster.
	largest float64
	// sizes are the clusters' numbers of cases.
	sizes []float64
	// ssb and ssw are the between- and within-cluster sums of squares of the
	// differences, the one-way analysis of variance the grouped advice plans from.
	ssb, ssw float64
}

// clustered fits the cluster-robust variance of the mean of d when any of the cases
// (ids, sorted) declares a group; ok is false otherwise. A case's group is the current
// run's, else the baseline's; a case without one is its own cluster. With fewer than 2
// clusters only g is set.
//
// The estimator is CR2, the bias-reduced linearization of Bell and McCaffrey (2002): for
// a mean, the adjustment matrix (I − H_gg)^{−½} acts on a cluster's residual sum as the
// factor 1/√(1 − n_g/n), so
//
//	V = Σ_g (Σ_{i∈g} e_i)² / (1 − n_g/n) / n²,
//
// exactly unbiased when the cases are independent with equal variance, whatever the
// cluster sizes (CR1's G/(G−1) is unbiased only for equal sizes, and a cluster holding
// most cases made it too small). The degrees of freedom are Satterthwaite's for V under a
// working model in which the cases of a cluster are equicorrelated with the correlation
// ρ̂ of the residuals (Bell and McCaffrey 2002; Imbens and Kolesár 2016; Pustejovsky and
// Tipton 2018): df = (tr K)² / tr(K²), K = Gᵀ Ω G, G_g = (I − H) w_g. They equal G − 1 for
// equal sizes and independent cases and fall towards 1 as one cluster dominates.
func clustered(ids []string, d []float64, mean float64, cur, base map[string]string) (fit clusterFit, ok bool) {
	if len(cur) == 0 && len(base) == 0 {
		return fit, false
	}
	type cluster struct{ n, sum, sq float64 }
	index := map[string]int{}
	var cs []cluster // first-seen order over sorted ids: deterministic sums
	for i, id := range ids {
		key, has := cur[id]
		if !has {
			key, has = base[id]
		}
		if has {
			key = "g:" + key
			ok = true
		} else {
			key = "c:" + id // its own cluster; the prefixes keep case ids and group names apart
		}
		j, seen := index[key]
		if !seen {
			j = len(cs)
			index[key] = j
			cs = append(cs, cluster{})
		}
		e := d[i] - mean
		cs[j].n++
		cs[j].sum += e
		cs[j].sq += e * e
	}
	if !ok {
		return clusterFit{}, false
	}
	fit.g = len(cs)
	if fit.g < 2 {
		return fit, true
	}
	n := float64(len(ids))
	var v, ss, cross, pairs float64
	for _, c := range cs {
		v += c.sum * c.sum / (1 - c.n/n)
		ss += c.sq
		cross += c.sum*c.sum - c.sq // Σ_{i≠j∈g} e_i e_j
		pairs += c.n * (c.n - 1)
		fit.largest = max(fit.largest, c.n/n)
		fit.ssb += c.sum * c.sum / c.n // the residuals sum to 0 over all clusters
		fit.ssw += max(0, c.sq-c.sum*c.sum/c.n)
	}
	fit.v = v / (n * n)
	if ss > 0 && pairs > 0 {
		fit.rho = min(1, max(0, cross/pairs/(ss/n)))
	}
	fit.sizes = make([]float64, len(cs))
	for i, c := range cs {
		fit.sizes[i] = c.n
	}
	fit.df = bellMcCaffreyDF(fit.sizes, fit.rho)
	return fit, true
}

// bellMcCaffreyDF returns the Satterthwaite degrees of freedom of the CR2 variance of a
// mean over clusters of the given sizes (at least 2 clusters), when the cases of a
// cluster are equicorrelated with correlation rho and cases of different clusters are
// independent.
//
// With p_g = n_g/n, s_g = 1/√(1 − p_g) and q_g = 1ᵀΩ1_g = n_g(1 − ρ + ρ n_g), Q = Σ q_g,
// the matrix of the quadratic form is, up to a factor that cancels,
//
//	K = diag(s² q) − a bᵀ − b aᵀ + Q b bᵀ,   a = s∘q,  b = s∘p,
//
// a diagonal plus a rank-two matrix, so tr K and tr K² take O(G) operations.
func bellMcCaffreyDF(sizes []float64, rho float64) float64 {
	var n float64
	for _, m := range sizes {
		n += m
	}
	var Q float64
	for _, m := range sizes {
		Q += m * (1 - rho + rho*m)
	}
	var tr, dd, dl, aa, bb, ab float64
	for _, m := range sizes {
		p := m / n
		s := 1 / math.Sqrt(1-p)
		q := m * (1 - rho + rho*m)
		dg, a, b := s*s*q, s*q, s*p
		lg := -2*a*b + Q*b*b // the diagonal of the rank-two part
		tr += dg + lg
		dd += dg * dg
		dl += dg * lg
		aa += a * a
		bb += b * b
		ab += a * b
	}
	tr2 := dd + 2*dl + 2*ab*ab + Q*Q*bb*bb + 2*aa*bb - 4*Q*bb*ab
	if !(tr2 > 0) {
		return float64(len(sizes) - 1)
	}
	return tr * tr / tr2
}

// varianceDF returns the Satterthwaite degrees of freedom of the sample variance of n
// cases in clusters of the given sizes under the same working model as
// [bellMcCaffreyDF] (cases of a cluster equicorrelated with correlation rho):
// (tr MΩ)² / tr(MΩMΩ), M = I − 11ᵀ/n. It is n − 1 for independent cases and G − 1 for
// equal clusters whose cases are perfectly correlated.
func varianceDF(sizes []float64, rho float64) float64 {
	var n, Q, trO2, o2 float64
	for _, m := range sizes {
		q := m * (1 - rho + rho*m) // 1ᵀΩ_g 1
		n += m
		Q += q
		trO2 += m * (1 - rho*rho + rho*rho*m) // tr(Ω_g²)
		o2 += q * q / m                       // 1ᵀΩ_g² 1
	}
	num := n - Q/n
	den := trO2 - 2*o2/n + Q*Q/(n*n)
	if !(den > 0) {
		return float64(len(sizes) - 1)
	}
	return num * num / den
}
