package eval_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

func fakeGateway(t *testing.T, cfg fake.Config) (*gateway.Gateway, *fake.Provider) {
	t.Helper()
	p, err := fake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "m", Spec: gateway.ModelSpec{
			ID: "fake-2024-01-01", Provider: "fake", MaxOutputTokens: 32, ContextWindow: 1000,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002},
		}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g, p
}

func TestModelRunnerRendersAndPrices(t *testing.T) {
	g, p := fakeGateway(t, fake.Config{Script: []fake.Step{{Text: "Paris"}}, Record: true})
	tmpl, err := eval.ParsePrompt("Q{{.ID}} [{{index .Tags 0}}]: {{.Input}}")
	if err != nil {
		t.Fatal(err)
	}
	r := &eval.ModelRunner{Gateway: g, Alias: "m", System: "Answer in one word.", Prompt: tmpl}
	ans, err := r.Run(context.Background(), eval.Case{ID: "fr", Input: "Capital of France?", Expected: "Paris", Tags: []string{"europe"}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Text != "Paris" || ans.Model != "fake-2024-01-01" || ans.CostUSD <= 0 || ans.InputTokens == 0 {
		t.Errorf("answer %+v", ans)
	}
	reqs := p.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	msgs := reqs[0].Messages
	if len(msgs) != 2 || msgs[0].Role != gateway.RoleSystem || msgs[0].Content != "Answer in one word." ||
		msgs[1].Content != "Qfr [europe]: Capital of France?" {
		t.Errorf("messages %+v", msgs)
	}
	if strings.Contains(msgs[1].Content, "Paris") {
		t.Error("the prompt leaked the expected answer")
	}
}

// TestModelRunnerSeedsTheSample checks that the sample identity reaches the
// provider: an answer-key fake answers (case, sample) reproducibly.
func TestModelRunnerSeedsTheSample(t *testing.T) {
	key := &fake.AnswerKey{Accuracy: 0.5, Cases: []fake.Case{{ID: "a", Input: "qa", Answer: "A"}, {ID: "b", Input: "qb", Answer: "B"}}}
	g, _ := fakeGateway(t, fake.Config{AnswerKey: key, Seed: 7})
	r := &eval.ModelRunner{Gateway: g, Alias: "m"}
	c := eval.Case{ID: "a", Input: "qa", Expected: "A"}
	var first []string
	for i := range 20 {
		ans, err := r.Run(context.Background(), c, i)
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, ans.Text)
	}
	for i := range 20 {
		ans, _ := r.Run(context.Background(), c, i)
		if ans.Text != first[i] {
			t.Fatalf("sample %d answered %q then %q", i, first[i], ans.Text)
		}
	}
	if !slicesContains(first, "A") || !slicesContains(first, "B") {
		t.Errorf("20 samples at accuracy 0.5 were all the same: %v", first)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestModelRunnerBadTemplate(t *testing.T) {
	g, _ := fakeGateway(t, fake.Config{Script: []fake.Step{{Text: "x"}}})
	tmpl, err := eval.ParsePrompt("{{.Expected}}")
	if err != nil {
		t.Fatal(err)
	}
	r := &eval.ModelRunner{Gateway: g, Alias: "m", Prompt: tmpl}
	if _, err := r.Run(context.Background(), eval.Case{ID: "x", Input: "i", Expected: "e"}, 0); err == nil {
		t.Error("a template naming Expected rendered")
	}
	if _, err := eval.ParsePrompt("{{.Input"); err == nil {
		t.Error("an unclosed action parsed")
	}
}

func TestGatewayJudge(t *testing.T) {
	g, p := fakeGateway(t, fake.Config{Script: []fake.Step{{Text: "The answer is right.\nSCORE: 1"}}, Record: true})
	j := eval.NewLLMJudge(&eval.GatewayJudge{Gateway: g, Alias: "m"}, "1 if the city is right")
	score, err := j.Score(context.Background(), eval.Case{ID: "fr", Input: "Capital of France?", Expected: "Paris"}, "Paris")
	if err != nil {
		t.Fatal(err)
	}
	if score != 1 {
		t.Errorf("score %v, want 1", score)
	}
	if !j.ModelDerived() {
		t.Error("an LLM judge must be model-derived")
	}
	if reqs := p.Requests(); len(reqs) != 1 || !strings.Contains(reqs[0].Messages[1].Content, "Paris") {
		t.Errorf("judge request %+v", reqs)
	}
}
