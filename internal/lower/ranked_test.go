package lower_test

import (
	"testing"

	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/eval"
)

// TestRankedMetricNamesAgree checks that ir (which vets an eval's metrics)
// and the runtime (which builds them) read ranked metric names alike: ir
// cannot import the runtime, so each parses the name, and a name one
// accepts and the other refuses would pass vet and fail eval, or the
// reverse.
func TestRankedMetricNamesAgree(t *testing.T) {
	for _, name := range []string{
		"recall@1", "recall@4", "mrr@10", "ndcg@100", "ndcg@999",
		"", "recall", "recall@", "recall@0", "recall@-1", "recall@04", "recall@+4", "recall@4x",
		"precision@4", "citation_grounding", "Recall@4", "recall@ 4", "exact_match", "llm_judge",
	} {
		kind, k, ranked := ir.RankedMetric(name)
		m, err := eval.ParseRetrievalMetric(name)
		if ranked != (err == nil) {
			t.Errorf("%q: ir says ranked %v (%s@%d), the runtime says %v", name, ranked, kind, k, err)
			continue
		}
		if ranked && m.Name() != name {
			t.Errorf("%q: the runtime's metric is named %q", name, m.Name())
		}
	}
}
