#!/bin/sh
# eino-compare.sh: a 2-step run (a tool call, then the answer, from a fake
# model) in aid beside Eino's react agent with a fake chat model, in one
# session, alternating, compared with benchstat.
#
#   scripts/eino-compare.sh [ROUNDS]
#
# It writes a scratch Go module (default /tmp/aid-eino-compare, or
# $EINO_COMPARE_DIR) that takes Eino from the Go module proxy and this
# checkout of aid through a replace directive, so that neither Eino nor its
# dependencies enter this repository's go.mod. benchstat is run with
# `go run golang.org/x/perf/cmd/benchstat@latest` unless BENCHSTAT names a
# binary.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${EINO_COMPARE_DIR:-/tmp/aid-eino-compare}
rounds=${1:-10}
eino=${EINO_VERSION:-v0.7.36}
mkdir -p "$dir"
cd "$dir"
cat > go.mod <<EOF
module aidcompare

go 1.26

require (
	github.com/aidgen/aid v0.0.0
	github.com/cloudwego/eino $eino
)

replace github.com/aidgen/aid => $repo
EOF
cat > compare_test.go <<'EOF'
package aidcompare

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

const (
	input       = "where is order A-1?"
	args        = `{"id":"A-1"}`
	observation = `{"status":"shipped"}`
)

var lookupSchema = json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)

// aidRuntime is aid's runtime over its gateway and the fake provider,
// which answers each run with a lookup call, then "done".
func aidRuntime(b *testing.B) *agents.Runtime {
	p, err := fake.New(fake.Config{Loop: true, Script: []fake.Step{
		{ToolCalls: []gateway.ToolCall{{ID: "c1", Name: "lookup", Arguments: json.RawMessage(args)}}},
		{Text: "done"},
	}})
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models:    []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 100000, MaxOutputTokens: 100, Capabilities: []gateway.Capability{gateway.CapabilityTools}}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := agents.New(agents.Config{
		Gateway: gw,
		Agents:  []agents.Agent{{Name: "desk", Model: "small", Instructions: "You look up orders.", Tools: []string{"lookup"}}},
		Tools:   []agents.Tool{{Name: "lookup", Description: "Look up an order.", Input: lookupSchema}},
		Implementations: map[string]agents.Implementation{"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
			return observation, nil
		})},
	})
	if err != nil {
		b.Fatal(err)
	}
	return rt
}

// fakeModel is Eino's side of the fake provider: a lookup call, then
// "done" once the conversation holds the tool's answer.
type fakeModel struct{}

func (fakeModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	if last := in[len(in)-1]; last.Role == schema.Tool {
		return schema.AssistantMessage("done", nil), nil
	}
	return schema.AssistantMessage("", []schema.ToolCall{{ID: "c1", Type: "function", Function: schema.FunctionCall{Name: "lookup", Arguments: args}}}), nil
}

func (fakeModel) Stream(context.Context, []*schema.Message, ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	panic("not streamed")
}

func (m fakeModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return m, nil }

// cpuTime is the process's CPU time in nanoseconds, the collector's
// included: on a shared machine the wall time also counts waits for a core.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

type lookup struct{}

func (lookup) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "lookup", Desc: "Look up an order.", ParamsOneOf: schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{
		"id": {Type: schema.String, Required: true},
	})}, nil
}

func (lookup) InvokableRun(context.Context, string, ...tool.Option) (string, error) {
	return observation, nil
}

func BenchmarkTwoStep(b *testing.B) {
	ctx := context.Background()
	b.Run("aid", func(b *testing.B) {
		rt := aidRuntime(b)
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			res, err := rt.Run(ctx, "desk", input, agents.RunOptions{})
			if err != nil || res.Answer != "done" || len(res.Steps) != 2 {
				b.Fatalf("%s %q: %v", res.Status, res.Answer, err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("eino", func(b *testing.B) {
		ag, err := react.NewAgent(ctx, &react.AgentConfig{
			ToolCallingModel: fakeModel{},
			ToolsConfig:      compose.ToolsNodeConfig{Tools: []tool.BaseTool{lookup{}}},
			MessageModifier: func(_ context.Context, in []*schema.Message) []*schema.Message {
				return append([]*schema.Message{schema.SystemMessage("You look up orders.")}, in...)
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		cpu := cpuTime()
		for b.Loop() {
			out, err := ag.Generate(ctx, []*schema.Message{schema.UserMessage(input)})
			if err != nil || out.Content != "done" {
				b.Fatalf("%v: %v", out, err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
}
EOF
# Eino's JSON library must be new enough for this Go release.
go get "github.com/cloudwego/eino@$eino" github.com/bytedance/sonic@latest
go mod tidy
go test -c -o compare.test .
: > aid.txt
: > eino.txt
for _ in $(seq "$rounds"); do
	./compare.test -test.run '^$' -test.bench 'BenchmarkTwoStep/aid$' -test.benchmem -test.count 1 | sed 's|TwoStep/aid|TwoStep|' >> aid.txt
	./compare.test -test.run '^$' -test.bench 'BenchmarkTwoStep/eino$' -test.benchmem -test.count 1 | sed 's|TwoStep/eino|TwoStep|' >> eino.txt
done
if [ -n "${BENCHSTAT:-}" ]; then
	"$BENCHSTAT" eino=eino.txt aid=aid.txt
else
	go run golang.org/x/perf/cmd/benchstat@latest eino=eino.txt aid=aid.txt
fi
