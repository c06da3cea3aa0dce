package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
)

// ReplayConfig is the agents configuration of an application for
// agents.Replay: its agents, tools (declarations only), budgets,
// approval policy and guardrails (which judge again, offline), and a gateway with its pinned catalog whose providers
// refuse every call, so that a replay reaches no network and spends
// nothing even if it tried. Nothing is opened: no store, no database, no
// file beyond the description, no server. The tools of a kind that learns
// their definitions from outside the application (an MCP server's) are
// built from learned, the definitions the recording holds
// (agents.Recording.Learned), as the recorded run saw them.
func ReplayConfig(desc Description, learned []agents.LearnedTool) (agents.Config, error) {
	providers := make(map[string]gateway.Provider, len(desc.Providers))
	for _, p := range desc.Providers {
		providers[p.Name] = offline{}
	}
	g, err := gateway.New(gateway.Config{Models: desc.Models, Providers: providers, Budgets: desc.Budgets, Retry: gateway.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		return agents.Config{}, fmt.Errorf("replaying %s: building the gateway: %w", desc.Name, err)
	}
	var tools []agents.Tool
	expand := map[string][]string{}
	for _, t := range desc.Tools {
		lk, ok := t.Kind.(agents.LearnedToolKind)
		if !ok {
			tools = append(tools, t.Decl)
			continue
		}
		built, err := lk.RecordedTools(t.Decl, learned)
		if err != nil {
			return agents.Config{}, fmt.Errorf("replaying %s: tool %q: %w", desc.Name, t.Decl.Name, err)
		}
		tools = appendBuilt(tools, expand, t.Decl.Name, built)
	}
	return agents.Config{
		Gateway: g, Agents: expandTools(desc.Agents, expand), Tools: tools, Budgets: desc.Budgets,
		Approvals: desc.Approvals, Conditions: desc.Conditions, App: desc.Name, AppVersion: desc.Version,
		Guardrails: desc.Guardrails, DefaultGuardrails: desc.Service.Guardrails,
		Skills: replaySkills(desc),
	}, nil
}

// offline is a provider that refuses every call: a replay answers model
// calls from its recording, and must never reach a provider.
type offline struct{}

// errOffline is what an offline provider answers.
var errOffline = errors.New("replay: the provider was called; a replay answers from its recording")

func (offline) Kind() string { return "replay" }

func (offline) Capabilities() []gateway.Capability {
	return []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON, gateway.CapabilityStreaming, gateway.CapabilityVision}
}

func (offline) Generate(context.Context, gateway.ModelSpec, gateway.Request) (gateway.Response, error) {
	return gateway.Response{}, errOffline
}

func (offline) Stream(context.Context, gateway.ModelSpec, gateway.Request) (gateway.DeltaStream, error) {
	return nil, errOffline
}

func (offline) Embed(context.Context, gateway.ModelSpec, []string) (gateway.EmbedResponse, error) {
	return gateway.EmbedResponse{}, errOffline
}
