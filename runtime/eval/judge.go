package eval

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// JudgeModel is the one model call an [LLMJudge] needs: a prompt in, the model's reply out.
//
// It is deliberately tiny so that any model client (the gateway, a test fake) can be
// adapted to it with a [JudgeFunc].
type JudgeModel interface {
	// Judge sends the prompt to the model and returns its reply text.
	Judge(ctx context.Context, prompt string) (string, error)
}

// JudgeFunc adapts a function to [JudgeModel].
type JudgeFunc func(ctx context.Context, prompt string) (string, error)

// Judge calls f.
func (f JudgeFunc) Judge(ctx context.Context, prompt string) (string, error) { return f(ctx, prompt) }

// JudgeScale is the scale the judge is asked to answer on.
type JudgeScale int

const (
	// ScaleUnit asks for a number from 0 to 1 and uses it as the score.
	ScaleUnit JudgeScale = iota
	// ScaleFivePoint asks for an integer from 1 to 5 and maps it to (s−1)/4.
	ScaleFivePoint
)

// DefaultRubric is the rubric an [LLMJudge] uses when none is given.
const DefaultRubric = "Judge whether the answer is correct and complete with respect to the reference answer. " +
	"Wording, formatting and extra explanation do not matter; a wrong or missing fact does."

// LLMJudge scores an answer by asking a model to grade it against a rubric.
//
// It is model-derived: its scores may appear in reports and baselines, but a threshold on
// it is a [*GateConfigurationError] unless the judge is Calibrated, because a judge has
// errors of its own that only human labels can measure.
type LLMJudge struct {
	// Model is the grading model.
	Model JudgeModel
	// Rubric says what a good answer is; empty means DefaultRubric.
	Rubric string
	// Scale is the scale the judge answers on.
	Scale JudgeScale
	// Calibrated is set when the eval declares a calibration set of human labels for the
	// judge: the judge then scores verdicts, 1 when its score is at least JudgeVerdictCut
	// and 0 otherwise, because its agreement with people is measured on verdicts, and a
	// threshold on it is allowed (the gate corrects its pass rate; see [JudgeCalibration]).
	Calibrated bool
}

// IsCalibrated reports whether the judge was declared with a calibration set.
func (j *LLMJudge) IsCalibrated() bool { return j.Calibrated }

// NewLLMJudge returns a judge on the unit scale.
func NewLLMJudge(model JudgeModel, rubric string) *LLMJudge {
	return &LLMJudge{Model: model, Rubric: rubric}
}

// Name returns "llm_judge".
func (*LLMJudge) Name() string { return MetricLLMJudge }

// ModelDerived returns true.
func (*LLMJudge) ModelDerived() bool { return true }

// Prompt renders the grading prompt for one answer. The case and the answer are fenced
// so that text inside them reads as data, not as instructions to the judge.
func (j *LLMJudge) Prompt(c Case, answer string) string {
	rubric := j.Rubric
	if rubric == "" {
		rubric = DefaultRubric
	}
	var b strings.Builder
	b.WriteString("You are grading one answer from an automated evaluation.\n\n")
	b.WriteString("Rubric:\n" + rubric + "\n\n")
	fence := func(title, body string) {
		fmt.Fprintf(&b, "%s (between the markers):\n<<<BEGIN>>>\n%s\n<<<END>>>\n\n", title, body)
	}
	fence("Input given to the system", c.Input)
	fence("Reference answer", c.Expected)
	fence("Answer to grade", answer)
	b.WriteString("Give a one-paragraph justification, then end with a final line of exactly this form:\n")
	if j.Scale == ScaleFivePoint {
		b.WriteString("SCORE: <an integer from 1 (wrong) to 5 (fully correct)>\n")
	} else {
		b.WriteString("SCORE: <a number from 0 (wrong) to 1 (fully correct)>\n")
	}
	return b.String()
}

// Score asks the model and parses the last "SCORE:" line of its reply.
func (j *LLMJudge) Score(ctx context.Context, c Case, answer string) (float64, error) {
	if j.Model == nil {
		return 0, errors.New("llm_judge: no judge model configured")
	}
	reply, err := j.Model.Judge(ctx, j.Prompt(c, answer))
	if err != nil {
		return 0, fmt.Errorf("llm_judge: %w", err)
	}
	v, err := ParseJudgeScore(reply, j.Scale)
	if err != nil || !j.Calibrated {
		return v, err
	}
	if v >= JudgeVerdictCut {
		return 1, nil
	}
	return 0, nil
}

var scoreLine = regexp.MustCompile(`(?im)^[\s*_#>-]*score[\s*_]*:[\s*_]*([0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:\s*/\s*([0-9]+(?:\.[0-9]+)?))?`)

// ParseJudgeScore extracts the score from a judge's reply: the last line that starts with
// "SCORE:" (any case, Markdown emphasis allowed). On the unit scale the value must lie in
// [0, 1]; on the five-point scale it must be an integer from 1 to 5 and is mapped to
// (s−1)/4. A fraction "a/b" is accepted on either scale and read as a/b.
func ParseJudgeScore(reply string, scale JudgeScale) (float64, error) {
	all := scoreLine.FindAllStringSubmatch(reply, -1)
	if len(all) == 0 {
		return 0, fmt.Errorf("llm_judge: no \"SCORE:\" line in the judge's reply %q", truncate(reply, 200))
	}
	m := all[len(all)-1]
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("llm_judge: parse score %q: %w", m[1], err)
	}
	if m[2] != "" {
		den, err := strconv.ParseFloat(m[2], 64)
		if err != nil || den <= 0 || v > den {
			return 0, fmt.Errorf("llm_judge: score %s/%s is not a fraction between 0 and 1", m[1], m[2])
		}
		return v / den, nil
	}
	switch scale {
	case ScaleFivePoint:
		if v != float64(int(v)) || v < 1 || v > 5 {
			return 0, fmt.Errorf("llm_judge: score %s is not an integer from 1 to 5", m[1])
		}
		return (v - 1) / 4, nil
	default:
		if v < 0 || v > 1 {
			return 0, fmt.Errorf("llm_judge: score %s is outside [0, 1]", m[1])
		}
		return v, nil
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
