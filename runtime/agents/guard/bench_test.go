package guard_test

import (
	"context"
	"testing"

	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
)

// BenchmarkCheck is one check of a short message by each cheap kind: what
// a guardrail adds to a run at each of its points.
func BenchmarkCheck(b *testing.B) {
	for _, g := range []guard.Guardrail{
		{Name: "injection", Kind: guard.KindPattern, Points: []guard.Point{guard.Input}, Action: guard.Block, Message: "no", Builtins: []string{"injection"}},
		{Name: "card", Kind: guard.KindPattern, Points: []guard.Point{guard.Output}, Action: guard.Redact, Builtins: []string{"card"}},
		{Name: "cel", Kind: guard.KindCEL, Points: []guard.Point{guard.Input}, Action: guard.Block, Message: "no", When: "text.size() > 4000"},
	} {
		c, err := guard.Compile(g, guard.Deps{Conditions: cel.Language{}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(g.Name, func(b *testing.B) {
			b.ReportAllocs()
			v := guard.Value{Point: "input", Text: "What is the capital of France? Paris is the capital of France."}
			for b.Loop() {
				if _, err := c.Check(context.Background(), v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
