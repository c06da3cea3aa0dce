package eval_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/eval"
)

func TestParseJudgeScore(t *testing.T) {
	tests := []struct {
		reply   string
		scale   eval.JudgeScale
		want    float64
		wantErr bool
	}{
		{"Looks right.\nSCORE: 0.8", eval.ScaleUnit, 0.8, false},
		{"score: 1", eval.ScaleUnit, 1, false},
		{"Score:.5", eval.ScaleUnit, 0.5, false},
		{"**SCORE:** 0.25", eval.ScaleUnit, 0.25, false},
		{"SCORE: 0.2\nOn reflection...\nSCORE: 0.9", eval.ScaleUnit, 0.9, false},
		{"SCORE: 4/5", eval.ScaleUnit, 0.8, false},
		{"SCORE: 3", eval.ScaleFivePoint, 0.5, false},
		{"SCORE: 1", eval.ScaleFivePoint, 0, false},
		{"SCORE: 5", eval.ScaleFivePoint, 1, false},
		{"SCORE: 1.5", eval.ScaleUnit, 0, true},
		{"SCORE: 6", eval.ScaleFivePoint, 0, true},
		{"SCORE: 2.5", eval.ScaleFivePoint, 0, true},
		{"SCORE: 0", eval.ScaleFivePoint, 0, true},
		{"SCORE: 6/5", eval.ScaleUnit, 0, true},
		{"I think it deserves a 0.7", eval.ScaleUnit, 0, true},
		{"the score: 0.7 is mine", eval.ScaleUnit, 0, true},
	}
	for _, tt := range tests {
		got, err := eval.ParseJudgeScore(tt.reply, tt.scale)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseJudgeScore(%q, %v) = %v, %v; want %v, error %v", tt.reply, tt.scale, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestLLMJudge(t *testing.T) {
	var prompts []string
	model := eval.JudgeFunc(func(ctx context.Context, prompt string) (string, error) {
		prompts = append(prompts, prompt)
		if strings.Contains(prompt, "Sydney") {
			return "Wrong city.\nSCORE: 0", nil
		}
		return "Correct.\nSCORE: 1", nil
	})
	j := eval.NewLLMJudge(model, "The answer must name the capital city.")
	if !j.ModelDerived() || j.Name() != "llm_judge" {
		t.Error("judge must be model-derived and named llm_judge")
	}
	c := eval.Case{ID: "au", Input: "What is the capital of Australia?", Expected: "Canberra"}
	for answer, want := range map[string]float64{"Canberra": 1, "Sydney": 0} {
		got, err := j.Score(context.Background(), c, answer)
		if err != nil || got != want {
			t.Errorf("Score(%q) = %v, %v; want %v", answer, got, err, want)
		}
	}
	p := prompts[0]
	for _, part := range []string{"The answer must name the capital city.", c.Input, "Canberra", "SCORE: <a number from 0"} {
		if !strings.Contains(p, part) {
			t.Errorf("prompt lacks %q:\n%s", part, p)
		}
	}
	five := &eval.LLMJudge{Model: model, Scale: eval.ScaleFivePoint}
	if p := five.Prompt(c, "x"); !strings.Contains(p, "integer from 1") || !strings.Contains(p, eval.DefaultRubric) {
		t.Errorf("five-point prompt with default rubric:\n%s", p)
	}

	boom := errors.New("provider down")
	failing := eval.NewLLMJudge(eval.JudgeFunc(func(context.Context, string) (string, error) { return "", boom }), "")
	if _, err := failing.Score(context.Background(), c, "x"); !errors.Is(err, boom) {
		t.Errorf("model error not wrapped: %v", err)
	}
	if _, err := (&eval.LLMJudge{}).Score(context.Background(), c, "x"); err == nil {
		t.Error("a judge without a model scored")
	}
}
