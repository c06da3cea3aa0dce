package eval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"github.com/aidgen/aid/runtime/gateway"
)

// ParsePrompt parses a prompt template such as "Q: {{.Input}}", rendered
// with a case's dataset.PromptData. A field that PromptData lacks fails
// when the template is rendered, not silently.
func ParsePrompt(text string) (*template.Template, error) {
	t, err := template.New("prompt").Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("parsing prompt template: %w", err)
	}
	return t, nil
}

// ModelRunner is the model target of an eval: it renders each case into a
// prompt and asks one alias through the gateway. Every call is priced,
// charged and traced by the gateway like any other; the sample identity is
// put on the context (gateway.WithSample), so a seeded fake provider answers
// each (case, sample) reproducibly. The model that answered is reported
// with [RecordPin] as the target's, so a baseline pins it.
type ModelRunner struct {
	// Gateway is the door to the model.
	Gateway *gateway.Gateway
	// Alias is the alias that answers.
	Alias string
	// Fallbacks are the aliases tried, in order, on every call when Alias
	// fails with an error gateway.IsFallbackEligible accepts. The answer
	// records which alias answered, so a report can tell the target's
	// score from its fallbacks'.
	Fallbacks []string
	// System, when not empty, is the system message of every request.
	System string
	// Prompt renders a case as the user message; nil sends the input as is.
	Prompt *template.Template
	// MaxOutputTokens bounds each answer; zero means the model's bound.
	MaxOutputTokens int
	// Options are passed to every Generate call (budgets).
	Options []gateway.CallOption
}

// callOptions returns opts with the fallbacks added, in a new slice: a
// runner and a judge are shared by concurrent samples.
func callOptions(opts []gateway.CallOption, fallbacks []string) []gateway.CallOption {
	if len(fallbacks) == 0 {
		return opts
	}
	return append(slices.Clip(opts), gateway.WithFallbacks(fallbacks...))
}

// Run implements Runner.
func (r *ModelRunner) Run(ctx context.Context, c Case, sample int) (Answer, error) {
	user := c.Input
	if r.Prompt != nil {
		var b strings.Builder
		if err := r.Prompt.Execute(&b, c.PromptData()); err != nil {
			return Answer{}, fmt.Errorf("rendering prompt for case %q: %w", c.ID, err)
		}
		user = b.String()
	}
	req := gateway.Request{MaxOutputTokens: r.MaxOutputTokens}
	if r.System != "" {
		req.Messages = append(req.Messages, gateway.Message{Role: gateway.RoleSystem, Content: r.System})
	}
	req.Messages = append(req.Messages, gateway.Message{Role: gateway.RoleUser, Content: user})
	ctx = gateway.WithSample(ctx, gateway.SampleKey{Case: c.ID, Index: sample})
	res, err := r.Gateway.Generate(ctx, r.Alias, req, callOptions(r.Options, r.Fallbacks)...)
	if err != nil {
		return Answer{}, err
	}
	if err := recordGatewayPin(ctx, r.Gateway, RoleTarget, res); err != nil {
		return Answer{}, err
	}
	return Answer{
		Text:         res.Text,
		Model:        res.Model,
		Alias:        res.Alias,
		FellBack:     res.FellBack,
		CostUSD:      res.CostUSD,
		InputTokens:  res.Usage.InputTokens,
		OutputTokens: res.Usage.OutputTokens,
	}, nil
}

// GatewayJudge is the grading model of an LLMJudge, asked through the
// gateway, so a judge's calls are priced and budgeted like the target's.
// The model that graded is reported with [RecordPin] as the judge's.
type GatewayJudge struct {
	// Gateway is the door to the model.
	Gateway *gateway.Gateway
	// Alias is the judging alias.
	Alias string
	// Fallbacks are the aliases tried, in order, on every call when Alias
	// fails with an error gateway.IsFallbackEligible accepts.
	Fallbacks []string
	// Options are passed to every Generate call.
	Options []gateway.CallOption
}

// judgeSystem keeps the judge to the answer format ParseJudgeScore reads.
const judgeSystem = "You grade answers strictly by the rubric. End your reply with the score line the prompt asks for."

// Judge implements JudgeModel.
func (j *GatewayJudge) Judge(ctx context.Context, prompt string) (string, error) {
	if j.Gateway == nil {
		return "", errors.New("judge has no gateway")
	}
	res, err := j.Gateway.Generate(ctx, j.Alias, gateway.Request{Messages: []gateway.Message{
		{Role: gateway.RoleSystem, Content: judgeSystem},
		{Role: gateway.RoleUser, Content: prompt},
	}}, callOptions(j.Options, j.Fallbacks)...)
	if err != nil {
		return "", err
	}
	if err := recordGatewayPin(ctx, j.Gateway, RoleJudge, res); err != nil {
		return "", err
	}
	return res.Text, nil
}
