package ir_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	aid "github.com/aidgen/aid"
	"github.com/aidgen/aid/ir"
)

// largeIR generates an application with the given numbers of agents and
// tools, every agent using a handful of tools, handing off and delegating,
// so that every reference pass has real work.
func largeIR(agents, tools int) string {
	var b strings.Builder
	b.WriteString(`name: "large"
version: "1.0.0"
providers: fake: {kind: "fake", seed: 1}
models: {
	"big-2024-01-01": {provider: "fake", contextWindow: 128000, maxOutputTokens: 4096, cost: {inputPer1kUSD: 0.0025, outputPer1kUSD: 0.01}, capabilities: ["tools", "json", "streaming"]}
	"small-2024-01-01": {provider: "fake", contextWindow: 128000, maxOutputTokens: 4096, cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}, capabilities: ["tools", "json", "streaming"]}
}
aliases: {large: "big-2024-01-01", small: "small-2024-01-01"}
budgets: run: {maxUSD: 0.5, scope: "run"}
`)
	for i := range tools {
		fmt.Fprintf(&b, `tools: tool_%d: {
	description: "Tool number %d looks something up."
	effects: "read"
	input: {type: "object", properties: {id: {type: "string"}, limit: {type: "integer", minimum: 1}}, required: ["id"]}
}
`, i, i)
	}
	for i := range agents {
		fmt.Fprintf(&b, `agents: agent_%d: {
	model: "large"
	ladder: ["large", "small"]
	onBudgetExhausted: "degrade"
	budget: "run"
	instructions: "You are agent %d."
	tools: ["tool_%d", "tool_%d", "tool_%d"]
	handoffs: ["agent_%d"]
	delegates: ["agent_%d"]
	memory: thread: tokenBudget: 4000
}
`, i, i, i%tools, (i+1)%tools, (i+2)%tools, (i+1)%agents, (i+2)%agents)
	}
	return b.String()
}

// BenchmarkLoad measures loading (parse, unify with the schema, validate,
// decode, and every semantic pass) of an application with 200 agents and
// 500 tools.
func BenchmarkLoad(b *testing.B) {
	path := filepath.Join(b.TempDir(), "app.cue")
	if err := os.WriteFile(path, []byte(largeIR(200, 500)), 0o644); err != nil {
		b.Fatal(err)
	}
	if _, err := ir.Load(path); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ir.Load(path); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLargeIRLoads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.cue")
	if err := os.WriteFile(path, []byte(largeIR(20, 50)), 0o644); err != nil {
		t.Fatal(err)
	}
	doc, err := ir.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Agents) != 20 || len(doc.Tools) != 50 {
		t.Fatalf("got %d agents and %d tools, want 20 and 50", len(doc.Agents), len(doc.Tools))
	}
	// Sorted by name, so agent_10 comes before agent_2.
	if doc.Agents[2].Name != "agent_10" {
		t.Errorf("agents are not sorted by name: third is %q", doc.Agents[2].Name)
	}
}

// BenchmarkCUEFloor compiles and validates the same generated file with
// CUE alone, without the schema, the decoding or any pass: the least any
// CUE-based loader of this file can cost. Compare its ratio to
// BenchmarkLoad in one run (go test -bench 'Load|CUEFloor' ./ir/).
func BenchmarkCUEFloor(b *testing.B) {
	src := largeIR(200, 500)
	b.ReportAllocs()
	for b.Loop() {
		v := cuecontext.New().CompileString(src, cue.Filename("app.cue"))
		if err := v.Validate(cue.Concrete(true)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnifyFloor runs the CUE stage of Load alone on the same
// generated file: building it with the compiled schema and validating the
// result for concreteness, without decoding or any pass. It is what the
// schema's constraints cost on top of BenchmarkCUEFloor; compare the two
// in one run (go test -bench 'CUEFloor|UnifyFloor|IRPasses' ./ir/).
func BenchmarkUnifyFloor(b *testing.B) {
	src := []byte(largeIR(200, 500))
	b.ReportAllocs()
	for b.Loop() {
		if err := ir.UnifyStage("app.cue", src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnifyValue unifies the same file, compiled on its own, with a
// precompiled #App and validates the result: the straightforward way to
// apply a schema, which evaluates the file's values twice (once alone,
// once with the schema). Load builds the file inside #App instead
// (BenchmarkUnifyFloor); this shows what that saves.
func BenchmarkUnifyValue(b *testing.B) {
	src := largeIR(200, 500)
	ctx := cuecontext.New()
	app := ctx.CompileString(aid.Schema(), cue.Filename(aid.SchemaFilename)).LookupPath(cue.ParsePath("#App"))
	if err := app.Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		v := app.Unify(ctx.CompileString(src, cue.Filename("app.cue")))
		if err := v.Validate(cue.Concrete(true)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIRPasses measures ir's own work on an already unified and
// validated value: decoding and every semantic pass. Its share of
// BenchmarkUnifyFloor, in one run, is what ir adds to CUE.
func BenchmarkIRPasses(b *testing.B) {
	check, err := ir.CheckStage(filepath.Join(b.TempDir(), "app.cue"), []byte(largeIR(200, 500)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := check(); err != nil {
			b.Fatal(err)
		}
	}
}
