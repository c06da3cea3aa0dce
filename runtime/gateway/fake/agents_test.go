package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

func stepCtx(ctx context.Context, agent string, step int) context.Context {
	return gateway.WithCallInfo(ctx, gateway.CallInfo{Agent: agent, Step: step, RunID: "run_1"})
}

func toolStep(name, args string) fake.Step {
	return fake.Step{ToolCalls: []gateway.ToolCall{{Name: name, Arguments: json.RawMessage(args)}}}
}

// describe renders a response compactly for comparisons.
func describe(r gateway.Response) string {
	if len(r.ToolCalls) == 0 {
		return "text:" + r.Text
	}
	var parts []string
	for _, c := range r.ToolCalls {
		parts = append(parts, c.ID+"="+c.Name+string(c.Arguments))
	}
	return "calls:" + strings.Join(parts, ",")
}

// Steps are picked by (agent, step) from the call info, not by arrival
// order: many runs interleaving at random still each get their own agent's
// step.
func TestAgentScriptsAreKeyedByStep(t *testing.T) {
	p := newFake(t, fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{
		"triage":  {toolStep("lookup", `{"id":"A"}`), toolStep("transfer_to_billing", "")},
		"billing": {{Text: "done"}},
	}})
	want := map[string]string{
		"triage/1":  `calls:call_triage_1_1=lookup{"id":"A"}`,
		"triage/2":  `calls:call_triage_2_1=transfer_to_billing{}`,
		"billing/1": "text:done",
	}
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for run := range 100 {
		wg.Go(func() {
			// Every run asks in a different order.
			order := []string{"billing/1", "triage/2", "triage/1"}
			if run%2 == 0 {
				order = []string{"triage/1", "triage/2", "billing/1"}
			}
			for _, k := range order {
				agent, step, _ := strings.Cut(k, "/")
				n := int(step[0] - '0')
				r, err := p.Generate(stepCtx(t.Context(), agent, n), model, ask("x"))
				if err != nil {
					errs <- err
					continue
				}
				if got := describe(r); got != want[k] {
					errs <- fmt.Errorf("run %d %s: got %s, want %s", run, k, got, want[k])
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestAgentScriptExhaustedAndLoop(t *testing.T) {
	script := map[string][]fake.Step{"a": {{Text: "one"}, {Text: "two"}}}
	p := newFake(t, fake.Config{Analyzer: analysis.English{}, Agents: script})
	_, err := p.Generate(stepCtx(t.Context(), "a", 3), model, ask("x"))
	if !errors.Is(err, fake.ErrScriptExhausted) || !strings.Contains(err.Error(), `agent "a" has 2 steps and was called for step 3`) {
		t.Fatalf("step 3: %v, want ErrScriptExhausted naming the agent", err)
	}
	if _, err := p.Generate(stepCtx(t.Context(), "a", 0), model, ask("x")); err == nil || !strings.Contains(err.Error(), "steps count from 1") {
		t.Fatalf("step 0: %v", err)
	}
	loop := newFake(t, fake.Config{Analyzer: analysis.English{}, Agents: script, Loop: true})
	var got []string
	for n := 1; n <= 5; n++ {
		r, err := loop.Generate(stepCtx(t.Context(), "a", n), model, ask("x"))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.Text)
	}
	if strings.Join(got, " ") != "one two one two one" {
		t.Fatalf("looped: %v", got)
	}
}

func TestUnscriptedAgent(t *testing.T) {
	agents := map[string][]fake.Step{"a": {{Text: "scripted"}}}
	tests := []struct {
		name    string
		cfg     fake.Config
		ctx     func(context.Context) context.Context
		want    string
		wantErr bool
	}{
		{"no other mode fails", fake.Config{Analyzer: analysis.English{}, Agents: agents}, func(c context.Context) context.Context { return stepCtx(c, "b", 1) }, "", true},
		{"script answers other agents", fake.Config{Analyzer: analysis.English{}, Agents: agents, Script: []fake.Step{{Text: "plain"}}}, func(c context.Context) context.Context { return stepCtx(c, "b", 1) }, "plain", false},
		{"answer key answers other agents", fake.Config{Analyzer: analysis.English{}, Agents: agents, AnswerKey: &fake.AnswerKey{Accuracy: 1, Cases: capitals}}, func(c context.Context) context.Context {
			return gateway.WithSample(stepCtx(c, "b", 1), gateway.SampleKey{Case: "fr"})
		}, "Paris", false},
		{"a call without call info echoes", fake.Config{Analyzer: analysis.English{}, Agents: agents}, func(c context.Context) context.Context { return c }, "echo: x", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newFake(t, tt.cfg)
			r, err := p.Generate(tt.ctx(t.Context()), model, ask("x"))
			if tt.wantErr {
				var ue *fake.UnscriptedAgentError
				if !errors.As(err, &ue) || ue.Agent != "b" || !strings.Contains(err.Error(), `scripted agents: a`) {
					t.Fatalf("got %v, want *UnscriptedAgentError for b", err)
				}
				return
			}
			if err != nil || r.Text != tt.want {
				t.Fatalf("got %q, %v; want %q", r.Text, err, tt.want)
			}
		})
	}
}

var billingSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"},"refunded":{"type":"boolean"}},"required":["answer"]}`)

// An answer step plays the answer key's answer for the call's sample, with
// the key's accuracy, and shaped as JSON when the request asks for it;
// without a key it plays its own text.
func TestAnswerStep(t *testing.T) {
	script := map[string][]fake.Step{"billing": {toolStep("get_invoice", `{}`), {Answer: true, Text: `{"answer":"demo"}`}}}
	key := &fake.AnswerKey{Accuracy: 0.5, Cases: capitals}
	p := newFake(t, fake.Config{Analyzer: analysis.English{}, Agents: script, AnswerKey: key, Seed: 9})
	jsonReq := ask("x")
	jsonReq.ResponseFormat = &gateway.JSONSchema{Name: "billing_output", Schema: billingSchema}
	right, wrong := 0, 0
	for _, c := range capitals {
		for i := range 40 {
			s := gateway.SampleKey{Case: c.ID, Index: i}
			ctx := gateway.WithSample(stepCtx(t.Context(), "billing", 1), s)
			r, err := p.Generate(ctx, model, jsonReq)
			if err != nil || len(r.ToolCalls) != 1 {
				t.Fatalf("step 1: %v %v", r, err)
			}
			ctx = gateway.WithSample(stepCtx(t.Context(), "billing", 2), s)
			r, err = p.Generate(ctx, model, jsonReq)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Answer string `json:"answer"`
			}
			if err := json.Unmarshal([]byte(r.Text), &doc); err != nil {
				t.Fatalf("answer %q is not the JSON document: %v", r.Text, err)
			}
			correct, _ := fake.Coin(9, s, 0.5)
			switch {
			case correct && doc.Answer == c.Answer:
				right++
			case !correct && doc.Answer != c.Answer && doc.Answer != "":
				wrong++
			default:
				t.Fatalf("case %s sample %d: answer %q, coin says correct=%v", c.ID, i, doc.Answer, correct)
			}
		}
	}
	if right == 0 || wrong == 0 {
		t.Fatalf("right %d wrong %d: accuracy 0.5 should give both", right, wrong)
	}

	// A demo conversation with the same fake (no sample, an input that is
	// no case) gets the step's own text; a sample of an unknown case is
	// still an error.
	r, err := p.Generate(stepCtx(t.Context(), "billing", 2), model, ask("I want a refund"))
	if err != nil || r.Text != `{"answer":"demo"}` {
		t.Fatalf("a demo call with an answer key: %q, %v", r.Text, err)
	}
	var uc *fake.UnknownCaseError
	if _, err := p.Generate(gateway.WithSample(stepCtx(t.Context(), "billing", 2), gateway.SampleKey{Case: "nope"}), model, ask("x")); !errors.As(err, &uc) {
		t.Fatalf("a sample of an unknown case: %v", err)
	}

	demo := newFake(t, fake.Config{Analyzer: analysis.English{}, Agents: script})
	r, err = demo.Generate(stepCtx(t.Context(), "billing", 2), model, jsonReq)
	if err != nil || r.Text != `{"answer":"demo"}` {
		t.Fatalf("without an answer key: %q, %v", r.Text, err)
	}
	bare := newFake(t, fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"a": {{Answer: true}}}})
	if _, err := bare.Generate(stepCtx(t.Context(), "a", 1), model, ask("x")); err == nil || !strings.Contains(err.Error(), "none is configured") {
		t.Fatalf("answer step without key or text: %v", err)
	}
	plain := newFake(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Answer: true}}})
	if _, err := plain.Generate(t.Context(), model, ask("x")); err == nil || !strings.Contains(err.Error(), "fake: a scripted step answers from the answer key") {
		t.Fatalf("answer step in a plain script: %v", err)
	}
}

// Answer-key mode without any script also shapes its answer for a JSON
// request: an agent with an output schema can be an eval target.
func TestAnswerKeyJSONRequest(t *testing.T) {
	p := newFake(t, answerKey(1, 1))
	req := ask("What is the capital of Spain?")
	req.ResponseFormat = &gateway.JSONSchema{Name: "out", Schema: billingSchema}
	r, err := p.Generate(t.Context(), model, req)
	if err != nil || r.Text != `{"answer":"Madrid"}` {
		t.Fatalf("got %q, %v", r.Text, err)
	}
	req.ResponseFormat.Schema = json.RawMessage(`{"type":"array"}`)
	if _, err := p.Generate(t.Context(), model, req); err == nil || !strings.Contains(err.Error(), "only string and object schemas") {
		t.Fatalf("array schema: %v", err)
	}
}

func TestAnswerDocument(t *testing.T) {
	tests := []struct {
		name, schema, want, err string
	}{
		{"string", `{"type":"string"}`, `"Paris"`, ""},
		{"nullable string", `{"type":["string","null"]}`, `"Paris"`, ""},
		{"first required string", `{"type":"object","properties":{"score":{"type":"number"},"city":{"type":"string"},"note":{"type":"string"}},"required":["score","city","note"]}`, `{"city":"Paris","note":"","score":0}`, ""},
		{"enum is not a home for text", `{"type":"object","properties":{"kind":{"type":"string","enum":["x","y"]},"text":{"type":"string"}},"required":["kind","text"]}`, `{"kind":"x","text":"Paris"}`, ""},
		{"optional string when none required", `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"string"},"n":{"type":"integer"}},"required":["n"]}`, `{"a":"Paris","n":0}`, ""},
		{"zero values", `{"type":"object","properties":{"s":{"type":"string"},"arr":{"type":"array"},"o":{"type":"object","properties":{"x":{"type":"boolean"},"y":{"type":"string"}},"required":["x"]},"c":{"const":"fixed"},"z":{"type":"null"}},"required":["s","arr","o","c","z"]}`, `{"arr":[],"c":"fixed","o":{"x":false},"s":"Paris","z":null}`, ""},
		{"properties without type", `{"properties":{"answer":{"type":"string"}}}`, `{"answer":"Paris"}`, ""},
		{"no string property", `{"type":"object","properties":{"n":{"type":"number"}}}`, "", "no string property"},
		{"array", `{"type":"array"}`, "", "only string and object"},
		{"not JSON", `{`, "", "read response schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := fake.AnswerDocument(json.RawMessage(tt.schema), "Paris")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %q, %v; want error containing %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestNewRejectsAgentScripts(t *testing.T) {
	tests := []struct {
		name    string
		scripts map[string][]fake.Step
		want    string
	}{
		{"empty script", map[string][]fake.Step{"a": {}}, `agent "a" has an empty script`},
		{"no name", map[string][]fake.Step{"": {{Text: "x"}}}, "no agent name"},
		{"answer with calls", map[string][]fake.Step{"a": {{Answer: true, ToolCalls: []gateway.ToolCall{{Name: "t"}}}}}, "cannot also call tools"},
		{"nameless call", map[string][]fake.Step{"a": {{ToolCalls: []gateway.ToolCall{{}}}}}, "tool call 1 has no name"},
		{"bad arguments", map[string][]fake.Step{"a": {toolStep("t", "{")}}, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := fake.New(fake.Config{Analyzer: analysis.English{}, Agents: tt.scripts}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestParseScript(t *testing.T) {
	src := `{
  "comment": "plays the demo",
  "agents": {
    "triage": [
      {"comment": "look it up", "toolCalls": [{"name": "lookup_order", "arguments": {"order_id": "AB-1", "n": 2}}]},
      {"text": "handing over", "toolCalls": [{"id": "c9", "name": "transfer_to_billing"}]}
    ],
    "billing": [
      {"answer": true, "output": {"answer": "ok", "refunded": true}},
      {"text": "plain"}
    ]
  }
}`
	sc, err := fake.ParseScript("s.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]fake.Step{
		"triage": {
			{ToolCalls: []gateway.ToolCall{{Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"AB-1","n":2}`)}}},
			{Text: "handing over", ToolCalls: []gateway.ToolCall{{ID: "c9", Name: "transfer_to_billing", Arguments: json.RawMessage(`{}`)}}},
		},
		"billing": {{Answer: true, Text: `{"answer":"ok","refunded":true}`}, {Text: "plain"}},
	}
	if g, w := fmt.Sprintf("%+v", sc.Agents), fmt.Sprintf("%+v", want); g != w {
		t.Fatalf("got  %s\nwant %s", g, w)
	}
}

func TestParseScriptErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"syntax", "{\n  \"agents\": {\n    \"a\": [ {\"text\": \"x\",, } ]\n  }\n}", []string{"s.json:3:25: invalid character ','"}},
		{"empty file", "", []string{"s.json:1:1: unexpected end of JSON input"}},
		{"not an object", `[]`, []string{"s.json:1:1: a script is a JSON object"}},
		{"no agents", `{}`, []string{`s.json:1:1: the script has no "agents" object`}},
		{"unknown top field", "{\"agents\": {\"a\": [{\"text\": \"x\"}]},\n \"agent\": {}}", []string{`s.json:2:2: unknown field "agent"`}},
		{"agents not an object", `{"agents": []}`, []string{`s.json:1:12: "agents" must be an object`}},
		{"steps not an array", `{"agents": {"a": {}}}`, []string{`s.json:1:18: agent "a": the script must be an array`}},
		{"no steps", `{"agents": {"a": []}}`, []string{`s.json:1:18: agent "a" has no steps`}},
		{"duplicate agent", "{\"agents\": {\"a\": [{\"text\": \"x\"}],\n\"a\": [{\"text\": \"y\"}]}}", []string{`s.json:2:1: agent "a" appears twice`}},
		{"all step errors at once", "{\"agents\": {\"a\": [\n  {\"txt\": \"x\"},\n  {},\n  {\"text\": \"x\", \"output\": 1},\n  {\"answer\": true, \"toolCalls\": [{\"name\": \"t\"}]},\n  {\"toolCalls\": [{\"arguments\": {}}]},\n  {\"toolCalls\": [{\"name\": \"t\", \"arguments\": [1]}]},\n  \"text\"\n]}}", []string{
			`s.json:2:3: agent "a" step 1: json: unknown field "txt"`,
			`s.json:3:3: agent "a" step 2: a step needs text, output, answer, toolCalls, status or drop`,
			`s.json:4:3: agent "a" step 3: give text or output, not both`,
			`s.json:5:3: agent "a" step 4: output and answer are final answers`,
			`s.json:6:3: agent "a" step 5: tool call 1 has no name`,
			`s.json:7:3: agent "a" step 6: tool call 1 (t): arguments must be a JSON object`,
			`s.json:8:3: agent "a" step 7: a step must be an object`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fake.ParseScript("s.json", []byte(tt.src))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, []byte(`{"agents": {"a": [{"text": "hi"}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sc, err := fake.LoadScript(path)
	if err != nil || len(sc.Agents["a"]) != 1 {
		t.Fatalf("%+v, %v", sc, err)
	}
	if _, err := fake.LoadScript(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "read script") {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte("{\n\"agents\": {\"a\": [{\"tex\": 1}]}}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.LoadScript(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":2:18: ") {
		t.Fatalf("positioned error: %v", err)
	}
}

// TestConversations: one script plays several conversations of an agent,
// selected by the input or the eval case, the first match winning and the
// one without "when" the default; each plays by step as a plain script.
func TestConversations(t *testing.T) {
	src := `{"agents": {
  "specialist": [
    {"when": {"case": "reject-reset"}, "steps": [{"text": "by case"}]},
    {"comment": "resets", "when": {"input": "reset"}, "steps": [
      {"toolCalls": [{"name": "reset_user_password", "arguments": {"user": "ana"}}]},
      {"text": "I reset your password."}
    ]},
    {"steps": [{"text": "I do not know."}]}
  ],
  "triage": [{"text": "plain"}]
}}`
	sc, err := fake.ParseScript("s.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Conversations["specialist"]) != 3 || len(sc.Agents["triage"]) != 1 || sc.Agents["specialist"] != nil {
		t.Fatalf("script %+v", sc)
	}
	p := newFake(t, fake.Config{Analyzer: analysis.English{}, Agents: sc.Agents, Conversations: sc.Conversations})
	sample := func(id string) context.Context {
		return gateway.WithSample(t.Context(), gateway.SampleKey{Case: id})
	}
	for _, tt := range []struct {
		ctx   context.Context
		step  int
		input string
		want  string
	}{
		{t.Context(), 1, "please reset my password", `calls:call_specialist_1_1=reset_user_password{"user":"ana"}`},
		{t.Context(), 2, "please reset my password", "text:I reset your password."},
		{sample("reject-reset"), 1, "please reset my password", "text:by case"},
		{sample("other"), 1, "please reset my password", `calls:call_specialist_1_1=reset_user_password{"user":"ana"}`},
		{t.Context(), 1, "my VPN is down", "text:I do not know."},
	} {
		r, err := p.Generate(stepCtx(tt.ctx, "specialist", tt.step), model, ask(tt.input))
		if err != nil || describe(r) != tt.want {
			t.Errorf("%q step %d: %s, %v; want %s", tt.input, tt.step, describe(r), err, tt.want)
		}
	}

	// Without a default, a call no conversation matches fails, naming the
	// agent and the input.
	p = newFake(t, fake.Config{Analyzer: analysis.English{}, Conversations: map[string][]fake.Conversation{
		"a": {{When: &fake.When{Input: "reset"}, Steps: []fake.Step{{Text: "x"}}}},
	}})
	_, err = p.Generate(stepCtx(t.Context(), "a", 1), model, ask("vpn"))
	var nc *fake.NoConversationError
	if !errors.As(err, &nc) || nc.Agent != "a" || nc.Input != "vpn" {
		t.Errorf("no match: %v", err)
	}
	if _, err := fake.New(fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"a": {{Text: "x"}}}, Conversations: map[string][]fake.Conversation{"a": {{Steps: []fake.Step{{Text: "y"}}}}}}); err == nil || !strings.Contains(err.Error(), `agent "a" has a script and conversations`) {
		t.Errorf("both: %v", err)
	}
}

func TestParseConversationErrors(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"mixed", "{\"agents\": {\"a\": [\n  {\"text\": \"x\"},\n  {\"steps\": [{\"text\": \"y\"}]}\n]}}", []string{`s.json:3:3: agent "a": give a list of steps or a list of conversations`}},
		{"bad when and steps", "{\"agents\": {\"a\": [\n  {\"when\": {\"inptu\": \"x\"}, \"steps\": [{\"text\": \"y\"}]},\n  {\"when\": {}, \"steps\": [\n    {\"txt\": 1}\n  ]},\n  {\"when\": {\"input\": \"z\"}},\n  {\"when\": {\"case\": \"c\"}, \"steps\": [], \"then\": 1}\n]}}", []string{
			`s.json:2:12: agent "a" conversation 1: when: json: unknown field "inptu"`,
			`s.json:3:12: agent "a" conversation 2: when: when needs "input" or "case"`,
			`s.json:4:5: agent "a" conversation 2 step 1: json: unknown field "txt"`,
			`s.json:6:3: agent "a" conversation 3 has no "steps"`,
			`s.json:7:36: agent "a" conversation 4 has no steps`,
			`s.json:7:40: agent "a" conversation 4: unknown field "then"`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := fake.ParseScript("s.json", []byte(tt.src))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain %q", err, w)
				}
			}
		})
	}
}
