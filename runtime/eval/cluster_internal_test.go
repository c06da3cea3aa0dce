package eval

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// denseDFs computes the Bell–McCaffrey degrees of freedom of the CR2 variance of a mean
// and the Satterthwaite degrees of freedom of the sample variance from their definitions,
// with dense n×n matrices: the reference for the O(G) formulas.
func denseDFs(sizes []int, rho float64) (bm, variance float64) {
	n := 0
	for _, m := range sizes {
		n += m
	}
	omega := mat.NewDense(n, n, nil)
	M := mat.NewDense(n, n, nil)
	var ws []*mat.VecDense
	start := 0
	for _, m := range sizes {
		w := mat.NewVecDense(n, nil)
		for i := start; i < start+m; i++ {
			for j := start; j < start+m; j++ {
				v := rho
				if i == j {
					v = 1
				}
				omega.Set(i, j, v)
			}
			w.SetVec(i, 1/(float64(n)*math.Sqrt(1-float64(m)/float64(n))))
		}
		ws = append(ws, w)
		start += m
	}
	for i := range n {
		for j := range n {
			v := -1 / float64(n)
			if i == j {
				v++
			}
			M.Set(i, j, v)
		}
	}
	// K = Gᵀ Ω G with G_g = M w_g.
	G := mat.NewDense(n, len(sizes), nil)
	for g, w := range ws {
		var z mat.VecDense
		z.MulVec(M, w)
		G.SetCol(g, z.RawVector().Data)
	}
	var og, K mat.Dense
	og.Mul(omega, G)
	K.Mul(G.T(), &og)
	var K2 mat.Dense
	K2.Mul(&K, &K)
	tr := mat.Trace(&K)
	bm = tr * tr / mat.Trace(&K2)

	var mo, mo2 mat.Dense
	mo.Mul(M, omega)
	mo2.Mul(&mo, &mo)
	t1 := mat.Trace(&mo)
	variance = t1 * t1 / mat.Trace(&mo2)
	return bm, variance
}

func TestBellMcCaffreyDF(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := [][]int{{2, 2, 1}, {5, 5, 5, 5}, {72, 12, 12, 12, 12}, {1, 1, 1}, {30, 1, 1, 1, 1, 1}}
	for range 20 {
		g := 2 + r.IntN(8)
		s := make([]int, g)
		for i := range s {
			s[i] = 1 + r.IntN(12)
		}
		cases = append(cases, s)
	}
	for _, sizes := range cases {
		f := make([]float64, len(sizes))
		for i, m := range sizes {
			f[i] = float64(m)
		}
		for _, rho := range []float64{0, 0.1, 0.5, 0.9, 1} {
			wantBM, wantV := denseDFs(sizes, rho)
			if got := bellMcCaffreyDF(f, rho); math.Abs(got-wantBM) > 1e-9*wantBM {
				t.Errorf("sizes %v, rho %v: Bell–McCaffrey df %v, dense %v", sizes, rho, got, wantBM)
			}
			if got := varianceDF(f, rho); math.Abs(got-wantV) > 1e-9*wantV {
				t.Errorf("sizes %v, rho %v: variance df %v, dense %v", sizes, rho, got, wantV)
			}
		}
	}
	// Equal sizes: G − 1 whatever the correlation; independent cases: n − 1 for the variance.
	for _, rho := range []float64{0, 0.5, 1} {
		if got := bellMcCaffreyDF([]float64{4, 4, 4, 4, 4}, rho); math.Abs(got-4) > 1e-12 {
			t.Errorf("equal sizes, rho %v: df %v, want 4", rho, got)
		}
	}
	if got := varianceDF([]float64{3, 1, 6}, 0); math.Abs(got-9) > 1e-12 {
		t.Errorf("independent cases: variance df %v, want 9", got)
	}
	if got := varianceDF([]float64{3, 3, 3}, 1); math.Abs(got-2) > 1e-12 {
		t.Errorf("perfectly correlated equal groups: variance df %v, want 2", got)
	}
	// One group holding 60% of the cases leaves few degrees of freedom, however many groups.
	if got := bellMcCaffreyDF([]float64{72, 12, 12, 12, 12}, 0); got > 2.5 {
		t.Errorf("dominated sizes: df %v, want below 2.5", got)
	}
}

// TestQuietFactor checks s_K against its definition: the largest ratio of the variance
// of a binary score, p(1−p), to the probability 1 − p^K − (1−p)^K that K runs differ.
func TestQuietFactor(t *testing.T) {
	for _, k := range []int{2, 3, 4, 5, 10, 50} {
		var best float64
		for i := 1; i <= 100000; i++ {
			p := 0.5 * float64(i) / 100000
			best = max(best, p*(1-p)/(1-math.Pow(1-p, float64(k))-math.Pow(p, float64(k))))
		}
		if got := quietFactor(k); got < best-1e-9 || got > best+1e-6 {
			t.Errorf("K = %d: s_K %v, sup over binary scores %v", k, got, best)
		}
	}
}

// denseCR2 is the CR2 variance of a mean from its definition, with dense matrices: for
// the intercept-only model, V = (XᵀX)⁻¹ Σ_g X_gᵀ A_g e_g e_gᵀ A_g X_g (XᵀX)⁻¹ with
// A_g = (I − H_gg)^{−½}, the symmetric inverse square root taken by eigendecomposition.
func denseCR2(groups [][]float64) float64 {
	var all []float64
	for _, g := range groups {
		all = append(all, g...)
	}
	n := float64(len(all))
	var mean float64
	for _, v := range all {
		mean += v / n
	}
	var meat float64
	for _, g := range groups {
		m := len(g)
		ig := mat.NewSymDense(m, nil)
		for i := range m {
			for j := i; j < m; j++ {
				v := -1 / n // −H_gg, H = 11ᵀ/n
				if i == j {
					v++
				}
				ig.SetSym(i, j, v)
			}
		}
		var eig mat.EigenSym
		if !eig.Factorize(ig, true) {
			panic("eigendecomposition failed")
		}
		var vec mat.Dense
		eig.VectorsTo(&vec)
		vals := eig.Values(nil)
		a := mat.NewDense(m, m, nil)
		for i := range m {
			for j := range m {
				var s float64
				for k := range m {
					s += vec.At(i, k) * vec.At(j, k) / math.Sqrt(vals[k])
				}
				a.Set(i, j, s)
			}
		}
		e := mat.NewVecDense(m, nil)
		for i, v := range g {
			e.SetVec(i, v-mean)
		}
		var ae mat.VecDense
		ae.MulVec(a, e)
		s := mat.Sum(&ae) // X_gᵀ A_g e_g
		meat += s * s
	}
	return meat / (n * n)
}

// TestCR2Dense checks the O(n) CR2 variance of clustered against its dense definition,
// with one group holding most of the cases among the layouts.
func TestCR2Dense(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	layouts := [][]int{{40, 3, 2, 5}, {1, 1, 1}, {5, 5, 5, 5}, {72, 12, 12, 12, 12}, {2, 1, 9}}
	for range 10 {
		g := 2 + r.IntN(8)
		s := make([]int, g)
		for i := range s {
			s[i] = 1 + r.IntN(10)
		}
		layouts = append(layouts, s)
	}
	for _, sizes := range layouts {
		var ids []string
		var d []float64
		groups := make([][]float64, len(sizes))
		of := map[string]string{}
		for g, m := range sizes {
			shift := r.NormFloat64()
			for i := range m {
				id := string(rune('a'+g)) + string(rune('A'+i/26)) + string(rune('a'+i%26))
				v := shift + r.NormFloat64()
				ids = append(ids, id)
				of[id] = string(rune('a' + g))
				groups[g] = append(groups[g], v)
			}
		}
		// clustered wants ids sorted with d in the same order; the ids above sort by
		// group, then by position, as they were made.
		for _, g := range groups {
			d = append(d, g...)
		}
		mean, _ := meanVar(d)
		fit, ok := clustered(ids, d, mean, of, nil)
		if !ok || fit.g != len(sizes) {
			t.Fatalf("sizes %v: clustered found %d groups (ok %v)", sizes, fit.g, ok)
		}
		want := denseCR2(groups)
		if math.Abs(fit.v-want) > 1e-9*want {
			t.Errorf("sizes %v: CR2 variance %v, dense %v", sizes, fit.v, want)
		}
	}
	// By hand: groups {1, 3} and {2}, mean 2, residuals (−1, 1) and (0): the first
	// group's sum is 0, so V = 0; and groups {1}, {2}, {6}: mean 3, residuals −2, −1, 3,
	// V = (4 + 1 + 9)/(1 − 1/3)/9 = 14·1.5/9 = 7/3.
	if fit, _ := clustered([]string{"a", "b", "c"}, []float64{1, 3, 2}, 2, map[string]string{"a": "x", "b": "x", "c": "y"}, nil); fit.v != 0 {
		t.Errorf("balanced residuals within a group: V = %v, want 0", fit.v)
	}
	if fit, _ := clustered([]string{"a", "b", "c"}, []float64{1, 2, 6}, 3, map[string]string{"a": "x", "b": "y", "c": "z"}, nil); math.Abs(fit.v-7.0/3) > 1e-12 {
		t.Errorf("singletons: V = %v, want 7/3", fit.v)
	}
}
