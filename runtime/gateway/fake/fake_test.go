package fake_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

var model = gateway.ModelSpec{ID: "fake-1", Provider: "fake", MaxOutputTokens: 64}

var capitals = []fake.Case{
	{ID: "fr", Input: "What is the capital of France?", Answer: "Paris"},
	{ID: "de", Input: "What is the capital of Germany?", Answer: "Berlin"},
	{ID: "it", Input: "What is the capital of Italy?", Answer: "Rome"},
	{ID: "es", Input: "What is the capital of Spain?", Answer: "Madrid"},
}

func ask(text string) gateway.Request {
	return gateway.Request{MaxOutputTokens: 64, Messages: []gateway.Message{
		{Role: gateway.RoleSystem, Content: "Answer with the city only."},
		{Role: gateway.RoleUser, Content: text},
	}}
}

func newFake(t *testing.T, cfg fake.Config) *fake.Provider {
	t.Helper()
	p, err := fake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func answerKey(seed uint64, accuracy float64) fake.Config {
	return fake.Config{Analyzer: analysis.English{}, Seed: seed, AnswerKey: &fake.AnswerKey{Cases: capitals, Accuracy: accuracy}}
}

// answers runs every case n times and returns the answers in order.
func answers(t *testing.T, p *fake.Provider, n int) []string {
	t.Helper()
	var out []string
	for _, c := range capitals {
		for i := range n {
			ctx := gateway.WithSample(t.Context(), gateway.SampleKey{Case: c.ID, Index: i})
			r, err := p.Generate(ctx, model, ask("ignored when the case id is known"))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, r.Text)
		}
	}
	return out
}

func TestAnswerKeyAccuracy(t *testing.T) {
	tests := []struct {
		accuracy float64
		lo, hi   float64 // accepted observed accuracy over 4×500 samples
	}{
		{0, 0, 0},
		{1, 1, 1},
		{0.7, 0.66, 0.74},
		{0.25, 0.21, 0.29},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.accuracy), func(t *testing.T) {
			p := newFake(t, answerKey(42, tt.accuracy))
			got := answers(t, p, 500)
			correct := 0
			for i, a := range got {
				want := capitals[i/500].Answer
				if a == want {
					correct++
					continue
				}
				plausible := false
				for _, c := range capitals {
					plausible = plausible || a == c.Answer
				}
				if !plausible {
					t.Fatalf("wrong answer %q is not another case's answer", a)
				}
			}
			if acc := float64(correct) / float64(len(got)); acc < tt.lo || acc > tt.hi {
				t.Errorf("observed accuracy %v, want within [%v, %v]", acc, tt.lo, tt.hi)
			}
		})
	}
}

func TestAnswerKeyIsSeeded(t *testing.T) {
	a := answers(t, newFake(t, answerKey(1, 0.5)), 20)
	b := answers(t, newFake(t, answerKey(1, 0.5)), 20)
	c := answers(t, newFake(t, answerKey(2, 0.5)), 20)
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Error("the same seed gave different answers")
	}
	if strings.Join(a, ",") == strings.Join(c, ",") {
		t.Error("another seed gave the very same answers")
	}
	// The exported coin predicts the fake.
	for i, ans := range a {
		c := capitals[i/20]
		correct, _ := fake.Coin(1, gateway.SampleKey{Case: c.ID, Index: i % 20}, 0.5)
		if correct != (ans == c.Answer) {
			t.Fatalf("sample %s/%d: Coin says correct=%v, fake answered %q", c.ID, i%20, correct, ans)
		}
	}
}

func TestAnswerKeyMatchesInput(t *testing.T) {
	p := newFake(t, answerKey(3, 1))
	r, err := p.Generate(t.Context(), model, ask("  What is the capital   of Italy? "))
	if err != nil || r.Text != "Rome" {
		t.Fatalf("by input: %q, %v", r.Text, err)
	}
	var uce *fake.UnknownCaseError
	if _, err := p.Generate(t.Context(), model, ask("What is the capital of Peru?")); !errors.As(err, &uce) || uce.Input == "" {
		t.Errorf("unknown input: %v", err)
	}
	ctx := gateway.WithSample(t.Context(), gateway.SampleKey{Case: "pe"})
	if _, err := p.Generate(ctx, model, ask("x")); !errors.As(err, &uce) || uce.Case != "pe" {
		t.Errorf("unknown case: %v", err)
	}
}

func TestAnswerKeyFixedWrongAnswer(t *testing.T) {
	p := newFake(t, fake.Config{Analyzer: analysis.English{}, AnswerKey: &fake.AnswerKey{Cases: capitals[:1], Accuracy: 0, Wrong: "Lyon"}})
	r, err := p.Generate(t.Context(), model, ask(capitals[0].Input))
	if err != nil || r.Text != "Lyon" {
		t.Fatalf("got %q, %v, want the fixed wrong answer", r.Text, err)
	}
}

func TestNewRejects(t *testing.T) {
	tests := []struct {
		name string
		cfg  fake.Config
	}{
		{"accuracy above 1", fake.Config{Analyzer: analysis.English{}, AnswerKey: &fake.AnswerKey{Accuracy: 1.5}}},
		{"negative accuracy", fake.Config{Analyzer: analysis.English{}, AnswerKey: &fake.AnswerKey{Accuracy: -0.1}}},
		{"duplicate id", fake.Config{Analyzer: analysis.English{}, AnswerKey: &fake.AnswerKey{Cases: []fake.Case{{ID: "a"}, {ID: "a"}}}}},
		{"duplicate input", fake.Config{Analyzer: analysis.English{}, AnswerKey: &fake.AnswerKey{Cases: []fake.Case{{ID: "a", Input: "q"}, {ID: "b", Input: " q"}}}}},
		{"case without id", fake.Config{Analyzer: analysis.English{}, AnswerKey: &fake.AnswerKey{Cases: []fake.Case{{Input: "q"}}}}},
		{"script and answer key", fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{}}, AnswerKey: &fake.AnswerKey{}}},
	}
	for _, tt := range tests {
		if _, err := fake.New(tt.cfg); err == nil {
			t.Errorf("%s: New succeeded", tt.name)
		}
	}
}

func TestScript(t *testing.T) {
	boom := errors.New("boom")
	p := newFake(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: "one"}, {Err: boom}}, ByModel: map[string][]fake.Step{"other": {{Text: "other model"}}}})
	r, err := p.Generate(t.Context(), model, ask("x"))
	if err != nil || r.Text != "one" || r.FinishReason != gateway.FinishStop {
		t.Fatalf("step 1: %+v, %v", r, err)
	}
	if _, err := p.Generate(t.Context(), model, ask("x")); !errors.Is(err, boom) {
		t.Fatalf("step 2: %v", err)
	}
	if _, err := p.Generate(t.Context(), model, ask("x")); !errors.Is(err, fake.ErrScriptExhausted) {
		t.Fatalf("step 3: %v, want ErrScriptExhausted", err)
	}
	r, err = p.Generate(t.Context(), gateway.ModelSpec{ID: "other"}, ask("x"))
	if err != nil || r.Text != "other model" {
		t.Fatalf("by model: %+v, %v", r, err)
	}

	loop := newFake(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: "a"}, {Text: "b"}}, Loop: true})
	var got []string
	for range 5 {
		r, err := loop.Generate(t.Context(), model, ask("x"))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Text)
	}
	if strings.Join(got, "") != "ababa" {
		t.Errorf("looped script gave %v", got)
	}
}

func TestUsageIsPlausible(t *testing.T) {
	tests := []struct {
		name       string
		text       string
		max        int
		wantOut    int64
		wantFinish gateway.FinishReason
	}{
		{"short", "Paris", 64, 2, gateway.FinishStop},
		{"cut at the output bound", strings.Repeat("word ", 100), 10, 10, gateway.FinishLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newFake(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: tt.text}}})
			req := ask("What is the capital of France?")
			req.MaxOutputTokens = tt.max
			r, err := p.Generate(t.Context(), model, req)
			if err != nil {
				t.Fatal(err)
			}
			if r.Usage.OutputTokens != tt.wantOut || r.FinishReason != tt.wantFinish {
				t.Errorf("usage %+v finish %q, want %d output tokens and %q", r.Usage, r.FinishReason, tt.wantOut, tt.wantFinish)
			}
			if r.Usage.InputTokens != gateway.EstimateInputTokens(req) || r.Usage.TotalTokens != r.Usage.InputTokens+r.Usage.OutputTokens {
				t.Errorf("usage %+v", r.Usage)
			}
			if gateway.EstimateTokens(r.Text) > int64(tt.max) {
				t.Errorf("text of %d bytes exceeds the %d-token bound", len(r.Text), tt.max)
			}
		})
	}
}

func TestEcho(t *testing.T) {
	p := newFake(t, fake.Config{Analyzer: analysis.English{}})
	r, err := p.Generate(t.Context(), model, ask("hello there"))
	if err != nil || r.Text != "echo: hello there" {
		t.Fatalf("echo: %+v, %v", r, err)
	}
}

func TestLatencyEndsWithTheContext(t *testing.T) {
	p := newFake(t, fake.Config{Analyzer: analysis.English{}, Latency: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Generate(ctx, model, ask("x"))
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("Generate: %v after %v", err, time.Since(start))
	}
	if _, err := p.Stream(ctx, model, ask("x")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stream: %v", err)
	}
	if _, err := p.Embed(ctx, gateway.ModelSpec{ID: "e", Dimensions: 4}, []string{"x"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Embed: %v", err)
	}

	short := newFake(t, fake.Config{Analyzer: analysis.English{}, Latency: 20 * time.Millisecond})
	start = time.Now()
	if _, err := short.Generate(t.Context(), model, ask("x")); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("latency not applied: %v after %v", err, time.Since(start))
	}
}

func TestStreamPieces(t *testing.T) {
	p := newFake(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: "to  be or not"}}})
	s, err := p.Stream(t.Context(), model, ask("x"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var pieces []string
	var last gateway.Delta
	for {
		d, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if d.Text != "" {
			pieces = append(pieces, d.Text)
		}
		last = d
	}
	if strings.Join(pieces, "|") != "to  |be |or |not" {
		t.Errorf("pieces %q", pieces)
	}
	if last.FinishReason != gateway.FinishStop || last.Usage == nil {
		t.Errorf("last delta %+v, want the finish reason and usage", last)
	}
}
