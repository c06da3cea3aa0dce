package appeval_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/app/appeval"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// ExampleAssemble builds the runtime from a description written by hand, as
// a team that does not use app.cue would (aidgen lowers an app.cue to the
// same value), and samples its eval: a keyless fake answers the capitals
// dataset correctly with probability 0.6.
func ExampleAssemble() {
	desc := app.Description{
		Name: "capitals", Version: "0.1.0", Dir: "../../../fixtures",
		Providers: []app.Provider{{Name: "fake", Kind: fake.Kind{
			AnswerKey: &fake.AnswerKeyFile{Dataset: "capitals.json", Accuracy: 0.6}}}},
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{
			ID: "fake-chat-2024-06-01", Provider: "fake", ContextWindow: 8192, MaxOutputTokens: 64,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.00015, OutputPer1kUSD: 0.0006},
		}}},
	}
	evals := []appeval.Eval{{
		Name: "capitals", Dataset: "capitals.json",
		Target:  appeval.EvalTarget{Model: "small", System: "Answer with the name of the city only."},
		Runs:    10,
		Metrics: []string{"exact_match"},
	}}
	a, err := appeval.Assemble(context.Background(), desc, evals, app.Options{})
	if err != nil {
		log.Fatal(err)
	}
	e, err := a.Eval("capitals")
	if err != nil {
		log.Fatal(err)
	}
	res, err := eval.Run(context.Background(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: e.Runs, Concurrency: 4})
	if err != nil {
		log.Fatal(err)
	}
	stats, err := res.Stats()
	if err != nil {
		log.Fatal(err)
	}
	st := stats["exact_match"]
	fmt.Printf("%d cases × %d runs, exact_match %.3f ± %.3f\n", st.Cases, st.Runs, st.Mean, st.StdErr)
	// Output:
	// 30 cases × 10 runs, exact_match 0.623 ± 0.024
}
