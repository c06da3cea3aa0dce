package eval_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// pinGateway serves "small" (fake-chat-2024-06-01 on provider fake), "grader" (a judge
// model on provider fake) and "down" (a model on provider broken that always fails, so
// that a call to it falls back).
func pinGateway(t *testing.T) *gateway.Gateway {
	t.Helper()
	ok, err := fake.New(fake.Config{Loop: true, ByModel: map[string][]fake.Step{
		"fake-chat-2024-06-01":  {{Text: "Paris"}},
		"fake-judge-2024-06-01": {{Text: "Right.\nSCORE: 1"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	broken, err := fake.New(fake.Config{Loop: true, ByModel: map[string][]fake.Step{
		"down-2024-01-01": {{Err: &gateway.ProviderError{Provider: "broken", StatusCode: 500, Err: errors.New("down")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(id, provider string) gateway.ModelSpec {
		return gateway.ModelSpec{ID: id, Provider: provider, MaxOutputTokens: 32, ContextWindow: 1000,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002}}
	}
	g, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{
			{Alias: "small", Spec: spec("fake-chat-2024-06-01", "fake")},
			{Alias: "grader", Spec: spec("fake-judge-2024-06-01", "fake")},
			{Alias: "down", Spec: spec("down-2024-01-01", "broken")},
		},
		Providers: map[string]gateway.Provider{"fake": ok, "broken": broken},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestRunRecordsPins runs a gateway target and a gateway judge through Run, with a
// budget-style wrapper around both (as the application wiring does), and checks that the
// result and the baseline record what actually answered: the fallback alias, not the
// alias asked for, and the judge's model in its own role.
func TestRunRecordsPins(t *testing.T) {
	g := pinGateway(t)
	ds, err := eval.NewDataset("pins", "1", []eval.Case{{ID: "fr", Input: "Capital of France?", Expected: "Paris"}, {ID: "fr2", Input: "And again?", Expected: "Paris"}})
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(r eval.Runner) eval.Runner {
		return eval.RunnerFunc(func(ctx context.Context, c eval.Case, k int) (eval.Answer, error) { return r.Run(ctx, c, k) })
	}
	judge := eval.JudgeFunc((&eval.GatewayJudge{Gateway: g, Alias: "grader"}).Judge)
	tests := []struct {
		name   string
		runner eval.Runner
		want   []eval.ModelPin
	}{
		{"target and judge", wrap(&eval.ModelRunner{Gateway: g, Alias: "small"}), []eval.ModelPin{
			{Role: eval.RoleTarget, Alias: "small", Model: "fake-chat-2024-06-01", Provider: "fake"},
			{Role: eval.RoleJudge, Alias: "grader", Model: "fake-judge-2024-06-01", Provider: "fake"},
		}},
		{"fallback answers", wrap(&eval.ModelRunner{Gateway: g, Alias: "down", Options: []gateway.CallOption{gateway.WithFallbacks("small")}}), []eval.ModelPin{
			{Role: eval.RoleTarget, Alias: "small", Model: "fake-chat-2024-06-01", Provider: "fake"},
			{Role: eval.RoleJudge, Alias: "grader", Model: "fake-judge-2024-06-01", Provider: "fake"},
		}},
		{"nothing answers", wrap(&eval.ModelRunner{Gateway: g, Alias: "down"}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := eval.Run(context.Background(), ds, tt.runner, []eval.Metric{eval.ExactMatch{}, eval.NewLLMJudge(judge, "1 if right")}, eval.Options{Runs: 3, Concurrency: 4})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res.Pins); diff != "" {
				t.Errorf("Result.Pins (-want +got):\n%s", diff)
			}
			if len(tt.want) == 0 {
				return
			}
			b, err := eval.NewBaseline(res, "v", "")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.Pins); diff != "" {
				t.Errorf("Baseline.Pins (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecordPinRefusesIncompletePins(t *testing.T) {
	for _, p := range []eval.ModelPin{
		{Role: "grader", Alias: "a", Model: "m", Provider: "p"},
		{Role: eval.RoleTarget, Model: "m", Provider: "p"},
		{Role: eval.RoleTarget, Alias: "a", Provider: "p"},
		{Role: eval.RoleJudge, Alias: "a", Model: "m", Provider: " "},
	} {
		if err := eval.RecordPin(context.Background(), p); err == nil {
			t.Errorf("RecordPin(%+v) accepted an incomplete pin", p)
		}
	}
	// A runner that reports a bad pin fails its sample rather than writing it.
	ds := smallDataset(t)
	bad := eval.RunnerFunc(func(ctx context.Context, c eval.Case, k int) (eval.Answer, error) {
		if err := eval.RecordPin(ctx, eval.ModelPin{Role: eval.RoleTarget, Alias: "a"}); err != nil {
			return eval.Answer{}, err
		}
		return eval.Answer{Text: c.Expected}, nil
	})
	res, err := eval.Run(context.Background(), ds, bad, []eval.Metric{eval.ExactMatch{}}, eval.Options{Runs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pins) != 0 || len(res.Errors()) != len(ds.Cases) {
		t.Errorf("pins %v, %d errors; want none recorded and every sample failed", res.Pins, len(res.Errors()))
	}
}

var (
	smallJune = eval.ModelPin{Role: eval.RoleTarget, Alias: "small", Model: "fake-chat-2024-06-01", Provider: "fake"}
	smallSept = eval.ModelPin{Role: eval.RoleTarget, Alias: "small", Model: "fake-chat-2024-09-01", Provider: "fake"}
	judgeJune = eval.ModelPin{Role: eval.RoleJudge, Alias: "grader", Model: "fake-judge-2024-06-01", Provider: "fake"}
)

func TestCompareModels(t *testing.T) {
	withPins := func(pins ...eval.ModelPin) *eval.Baseline { return &eval.Baseline{Pins: pins} }
	tests := []struct {
		name     string
		baseline *eval.Baseline
		current  []eval.ModelPin
		want     []string
	}{
		{"same models", withPins(judgeJune, smallJune), []eval.ModelPin{smallJune, judgeJune}, nil},
		{"no baseline", nil, []eval.ModelPin{smallJune}, nil},
		{"baseline without models", withPins(), []eval.ModelPin{smallJune}, nil},
		{"new version", withPins(smallJune, judgeJune), []eval.ModelPin{smallSept, judgeJune},
			[]string{"small: fake-chat-2024-06-01 → fake-chat-2024-09-01"}},
		{"new provider", withPins(smallJune), []eval.ModelPin{{Role: eval.RoleTarget, Alias: "small", Model: "fake-chat-2024-06-01", Provider: "azure"}},
			[]string{"small: fake-chat-2024-06-01 (fake) → fake-chat-2024-06-01 (azure)"}},
		{"judge added and target removed", withPins(smallJune), []eval.ModelPin{judgeJune},
			[]string{"small: fake-chat-2024-06-01 (fake) → (not in this run)", "grader (judge): (not in the baseline) → fake-judge-2024-06-01 (fake)"}},
		{"a second model for one alias", withPins(smallJune), []eval.ModelPin{smallJune, smallSept},
			[]string{"small: (not in the baseline) → fake-chat-2024-09-01 (fake)"}},
		{"same alias in two roles", withPins(smallJune), []eval.ModelPin{smallJune, {Role: eval.RoleJudge, Alias: "small", Model: "fake-chat-2024-06-01", Provider: "fake"}},
			[]string{"small (judge): (not in the baseline) → fake-chat-2024-06-01 (fake)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range eval.CompareModels(tt.baseline, tt.current) {
				got = append(got, c.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CompareModels (-want +got):\n%s", diff)
			}
		})
	}
	c := eval.CompareModels(withPins(smallJune), []eval.ModelPin{smallSept})
	want := []eval.ModelChange{{Kind: eval.ModelChanged, Role: eval.RoleTarget, Alias: "small",
		OldModel: "fake-chat-2024-06-01", OldProvider: "fake", NewModel: "fake-chat-2024-09-01", NewProvider: "fake"}}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("structured change (-want +got):\n%s", diff)
	}
}

// TestBaselineWithoutPinsIsByteStable reads the committed capitals baseline and a
// baseline from before pins were recorded and writes them back: the same bytes, and no
// pins invented.
func TestBaselineWithoutPinsIsByteStable(t *testing.T) {
	for _, path := range []string{"testdata/baseline-before-pins.json", "../../fixtures/capitals-baseline.json"} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := eval.ParseBaseline(path, data)
		if err != nil {
			t.Fatal(err)
		}
		again, err := eval.MarshalBaseline(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(data) {
			t.Errorf("%s does not re-encode to the same bytes:\n%s", path, cmp.Diff(string(data), string(again)))
		}
		if strings.Contains(path, "before-pins") && (b.Pins != nil || strings.Contains(string(again), "pinnedModels")) {
			t.Errorf("%s: a baseline without pins read as %v", path, b.Pins)
		}
	}
}

func TestBaselinePinsRoundTripAndDiff(t *testing.T) {
	b := capitalsBaseline(t, 0, 2)
	b.Pins = []eval.ModelPin{judgeJune, smallJune} // unsorted: written sorted, target first
	data, err := eval.MarshalBaseline(b)
	if err != nil {
		t.Fatal(err)
	}
	const want = `  "pinnedModels": [
    {
      "alias": "small",
      "model": "fake-chat-2024-06-01",
      "provider": "fake",
      "role": "target"
    },
    {
      "alias": "grader",
      "model": "fake-judge-2024-06-01",
      "provider": "fake",
      "role": "judge"
    }
  ]
}
`
	if !strings.HasSuffix(string(data), want) {
		t.Errorf("pins are written as\n%s\nwant the file to end with\n%s", data, want)
	}
	got, err := eval.ParseBaseline("b.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]eval.ModelPin{smallJune, judgeJune}, got.Pins); diff != "" {
		t.Errorf("pins read back (-want +got):\n%s", diff)
	}
	if c := eval.CompareModels(got, []eval.ModelPin{judgeJune, smallJune}); len(c) != 0 {
		t.Errorf("a round trip changes the models: %v", c)
	}

	cur := *got
	cur.Pins = []eval.ModelPin{smallSept}
	var diffs []string
	for _, c := range eval.DiffBaselines(got, &cur) {
		diffs = append(diffs, c.String())
	}
	wantDiffs := []string{
		"pinnedModels.target.small: fake-chat-2024-06-01 (fake) → fake-chat-2024-09-01 (fake)",
		"pinnedModels.judge.grader: fake-judge-2024-06-01 (fake) → (none)",
	}
	if d := cmp.Diff(wantDiffs, diffs); d != "" {
		t.Errorf("DiffBaselines (-want +got):\n%s", d)
	}
	if d := eval.DiffBaselines(nil, got); !strings.Contains(strings.Join(changeStrings(d), "\n"), "pinnedModels.target.small: (none) → fake-chat-2024-06-01 (fake)") {
		t.Errorf("a first baseline does not list its pins: %v", d)
	}
}

func changeStrings(cs []eval.BaselineChange) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	return out
}

func TestBaselinePinErrors(t *testing.T) {
	data, err := os.ReadFile("testdata/baseline-before-pins.json")
	if err != nil {
		t.Fatal(err)
	}
	withPins := func(pins string) []byte {
		return []byte(strings.Replace(string(data), `"note": `, `"pinnedModels": `+pins+`, "note": `, 1))
	}
	pin := `{"alias": "small", "model": "m-1", "provider": "fake", "role": "target"}`
	tests := []struct{ name, pins, want string }{
		{"unknown role", `[{"alias": "small", "model": "m-1", "provider": "fake", "role": "grader"}]`, `pinnedModels: pinned model 0: role "grader" is not "target" or "judge"`},
		{"no model", `[{"alias": "small", "provider": "fake", "role": "target"}]`, "pinned model 0: model is empty"},
		{"twice", `[` + pin + `, ` + pin + `]`, "pinned model 1: small: m-1 (fake) is listed twice"},
		{"unknown field", `[{"alias": "small", "model": "m-1", "provider": "fake", "role": "target", "version": 2}]`, `unknown field "version"`},
		{"not a list", `{"small": "m-1"}`, "field pinnedModels: got a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := eval.ParseBaseline("b.json", withPins(tt.pins))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := eval.ParseBaseline("b.json", withPins(`[`+pin+`]`)); err != nil {
		t.Errorf("a valid pin is refused: %v", err)
	}
	b := capitalsBaseline(t, 0, 2)
	b.Pins = []eval.ModelPin{{Role: eval.RoleTarget, Alias: "small"}}
	if _, err := eval.MarshalBaseline(b); err == nil || !strings.Contains(err.Error(), "model is empty") {
		t.Errorf("MarshalBaseline wrote an incomplete pin: %v", err)
	}
}
