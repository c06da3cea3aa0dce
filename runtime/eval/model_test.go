package eval_test

import (
	"context"
	"errors"
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

// twoModelGateway serves alias "m" (model fake-primary) and alias "spare"
// (model fake-spare) from one scripted fake.
func twoModelGateway(t *testing.T, cfg fake.Config) *gateway.Gateway {
	t.Helper()
	p, err := fake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spec := func(id string) gateway.ModelSpec {
		return gateway.ModelSpec{ID: id, Provider: "fake", MaxOutputTokens: 32, ContextWindow: 1000, Cost: gateway.CostProfile{InputPer1kUSD: 0.001}}
	}
	g, err := gateway.New(gateway.Config{
		Models:    []gateway.PinnedModel{{Alias: "m", Spec: spec("fake-primary")}, {Alias: "spare", Spec: spec("fake-spare")}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// down is a provider outage: an error the gateway falls through.
func down() fake.Step {
	return fake.Step{Err: &gateway.ProviderError{Provider: "fake", StatusCode: 500, Err: errors.New("upstream down")}}
}

// TestModelRunnerFallsBack runs an eval whose target model fails on some
// samples: the fallback answers them, each such answer says so, and the
// result counts them. Without the fallbacks the same samples fail.
func TestModelRunnerFallsBack(t *testing.T) {
	ds := &eval.Dataset{Name: "d", Version: "1", Cases: []eval.Case{{ID: "a", Input: "qa", Expected: "A"}, {ID: "b", Input: "qb", Expected: "B"}}}
	script := func() fake.Config {
		// Samples run in sample-major order with concurrency 1: a0, b0, a1, b1.
		return fake.Config{ByModel: map[string][]fake.Step{
			"fake-primary": {down(), {Text: "B"}, down(), {Text: "B"}},
			"fake-spare":   {{Text: "A"}, {Text: "A"}},
		}}
	}
	for _, tt := range []struct {
		name      string
		fallbacks []string
		wantFell  int
		wantErrs  int
	}{
		{"with fallbacks", []string{"spare"}, 2, 0},
		{"without fallbacks", nil, 0, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &eval.ModelRunner{Gateway: twoModelGateway(t, script()), Alias: "m", Fallbacks: tt.fallbacks}
			res, err := eval.Run(context.Background(), ds, r, []eval.Metric{eval.ExactMatch{}}, eval.Options{Runs: 2, Concurrency: 1})
			if err != nil {
				t.Fatal(err)
			}
			if res.FallbackAnswers != tt.wantFell {
				t.Errorf("FallbackAnswers = %d, want %d", res.FallbackAnswers, tt.wantFell)
			}
			errs := 0
			for _, cr := range res.Cases {
				for _, s := range cr.Samples {
					if s.Err != nil {
						errs++
						continue
					}
					wantAlias, wantModel := "m", "fake-primary"
					if cr.CaseID == "a" {
						wantAlias, wantModel = "spare", "fake-spare"
					}
					if s.Answer.Alias != wantAlias || s.Answer.Model != wantModel || s.Answer.FellBack != (wantAlias == "spare") || s.Scores[0] != 1 {
						t.Errorf("case %s sample %d: answer %+v scores %v", cr.CaseID, s.Index, s.Answer, s.Scores)
					}
				}
			}
			if errs != tt.wantErrs {
				t.Errorf("%d failed samples, want %d", errs, tt.wantErrs)
			}
		})
	}
}

// TestGatewayJudgeFallsBack checks that a judge's fallbacks are passed on
// its calls: the judging model is down and the fallback grades.
func TestGatewayJudgeFallsBack(t *testing.T) {
	g := twoModelGateway(t, fake.Config{ByModel: map[string][]fake.Step{
		"fake-primary": {down(), down()},
		"fake-spare":   {{Text: "SCORE: 1"}},
	}})
	if _, err := (&eval.GatewayJudge{Gateway: g, Alias: "m"}).Judge(context.Background(), "grade"); err == nil {
		t.Fatal("judge without fallbacks answered while its model is down")
	}
	got, err := (&eval.GatewayJudge{Gateway: g, Alias: "m", Fallbacks: []string{"spare"}}).Judge(context.Background(), "grade")
	if err != nil || got != "SCORE: 1" {
		t.Fatalf("Judge = %q, %v; want the fallback's grade", got, err)
	}
}
