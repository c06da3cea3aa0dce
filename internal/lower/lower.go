// Package lower turns a loaded IR document into the runtime's IR-free
// application description (runtime/app.Description): the one step between
// the IR and the runtime, used by aidgen eval, run and index, and, through
// gen, by generated services, which hold its result as a Go literal.
//
// It copies values and spells the IR's names in the runtime's types; it
// decides nothing. Whatever is more than copying (retry counts by provider
// kind, eval budget accounts, tools built from their kind) is the runtime's,
// in app.Assemble, so that the interpreter and a generated service cannot
// differ. It lives outside ir because ir never imports the runtime.
package lower

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
	"github.com/aidgen/aid/runtime/agents/tools/fixture"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/app/appeval"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
)

// Document lowers a loaded, validated document to an application
// description. File names stay relative; the description's Dir is the
// document's, so Assemble resolves them as ir did. It fails only on a
// document ir.Load would not return (a dangling alias), naming every such
// problem.
func Document(doc *ir.Document) (app.Description, error) {
	d := app.Description{
		Name:    doc.Name,
		Version: doc.Version,
		Dir:     doc.Dir,
		Service: app.Service{
			Listen: doc.Service.Listen,
			Entry:  doc.Service.Entry,
			Auth:   app.Auth{Kind: doc.Service.Auth.Kind, TokenEnv: doc.Service.Auth.TokenEnv},
			State:  state(doc.Service.State),
			Expose: expose(doc.Service.Expose),

			AllowedHosts:   doc.Service.AllowedHosts,
			AllowedOrigins: doc.Service.AllowedOrigins,
		},
	}
	for _, k := range doc.Keys {
		d.Service.Auth.Keys = append(d.Service.Auth.Keys, app.Key{Name: k.Name, Roles: k.Roles, Tenant: k.Tenant, SecretEnv: k.SecretEnv, SecretSHA256: k.SecretSHA256})
	}
	d.Service.Timeouts = timeouts(doc.Service.Timeouts)
	if len(doc.Service.Guardrails) > 0 {
		d.Service.Guardrails = slices.Clone(doc.Service.Guardrails)
	}
	conditions := false
	for _, g := range doc.Guardrails {
		d.Guardrails = append(d.Guardrails, g.Guard())
		conditions = conditions || g.Kind == string(guard.KindCEL)
	}
	if a := doc.Approvals; a != nil {
		d.Approvals.Default = policy.Action(a.Default)
		for _, r := range a.Rules {
			d.Approvals.Rules = append(d.Approvals.Rules, policy.Rule{Tool: r.Tool, When: r.When, Action: policy.Action(r.Action), Reason: r.Reason})
			conditions = conditions || r.When != ""
		}
	}
	if conditions {
		// Only then, so that a service without conditions links no CEL.
		d.Conditions = cel.Language{}
	}
	var errs []error
	for _, p := range doc.Providers {
		k, err := decodeKind(ProviderKinds, kind.Providers, p.Kind, p.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("provider %q: %w", p.Name, err))
			continue
		}
		d.Providers = append(d.Providers, app.Provider{Name: p.Name, Kind: k})
	}
	for _, a := range doc.Aliases {
		m, ok := doc.Model(a.Model)
		if !ok {
			errs = append(errs, fmt.Errorf("alias %q names unknown model %q", a.Name, a.Model))
			continue
		}
		pm := gateway.PinnedModel{Alias: a.Name, Spec: ModelSpec(m)}
		for _, dep := range m.Routes() {
			pm.Deployments = append(pm.Deployments, gateway.Deployment{Name: dep.Name, Provider: dep.Provider, Weight: dep.Weight})
		}
		if m.CoolDown != nil {
			pm.CoolDown = m.CoolDown.Std()
		}
		d.Models = append(d.Models, pm)
	}
	fakeEmbeddings(&d)
	for _, b := range doc.Budgets {
		d.Budgets = append(d.Budgets, gateway.Budget{Name: b.Name, MaxUSD: b.MaxUSD, MaxTotalTokens: b.MaxTotalTokens, Scope: gateway.Scope(b.Scope),
			Window: b.Window, TimeZone: b.TimeZone, AppliesToAll: b.AppliesTo == "all"})
	}
	for _, r := range doc.RateLimits {
		d.RateLimits = append(d.RateLimits, gateway.RateLimit{Name: r.Name, Scope: gateway.RateScope(r.Scope), Model: r.Model,
			RequestsPerMinute: r.RequestsPerMinute, TokensPerMinute: r.TokensPerMinute})
	}
	for _, t := range doc.Tools {
		tool, err := tool(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d.Tools = append(d.Tools, tool)
	}
	for _, a := range doc.Agents {
		d.Agents = append(d.Agents, agent(a))
	}
	for _, s := range doc.Skills {
		d.Skills = append(d.Skills, app.Skill{Name: s.Name, Description: s.Description, AllowedTools: slices.Clone(s.AllowedTools), Dir: s.Dir, Files: slices.Clone(s.Files)})
	}
	for _, s := range doc.Stores {
		k, err := decodeKind(StoreKinds, kind.Stores, s.Kind, s.Config, storeFields...)
		if err != nil {
			errs = append(errs, fmt.Errorf("store %q: %w", s.Name, err))
			continue
		}
		d.Stores = append(d.Stores, retrieval.StoreConfig{Name: s.Name, Distance: retrieval.Distance(s.Distance), Kind: k})
	}
	for _, r := range doc.Retrievers {
		d.Retrievers = append(d.Retrievers, retrieval.Config{
			Name:         r.Name,
			Source:       retrieval.Source{Kind: r.Source.Kind, Files: slices.Clone(r.Source.Files), Exclude: slices.Clone(r.Source.Exclude), OnInvalid: r.Source.OnInvalid},
			Chunking:     r.Chunking.Strategy,
			ChunkSize:    r.Chunking.Size,
			ChunkOverlap: r.Chunking.Overlap,
			EmbedModel:   r.EmbedModel,
			Store:        r.Store,
			TopK:         r.TopK,
			Rerank:       r.Rerank,
			Ranking:      ranking(r.Retrieval),
		})
	}
	for _, r := range doc.Resources {
		k, err := decodeKind(ResourceKinds, kind.Resources, r.Kind, r.Config)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", r.Kind, r.Name, err))
			continue
		}
		d.Resources = append(d.Resources, kind.Resource{Name: r.Name, Kind: k})
	}
	if err := errors.Join(errs...); err != nil {
		return app.Description{}, fmt.Errorf("lowering %s: %w", doc.Path, err)
	}
	return d, nil
}

// fakeEmbeddings sets the analyzer of the embeddings (fake.Kind.Analyzer)
// on every fake provider a pinned embedding model routes to, and on no
// other, so that a service whose fake provider does not embed links no
// stemmer.
func fakeEmbeddings(d *app.Description) {
	embeds := map[string]bool{}
	for _, m := range d.Models {
		if m.Spec.Kind == gateway.KindEmbedding {
			embeds[m.Spec.Provider] = true
			for _, dep := range m.Deployments {
				embeds[dep.Provider] = true
			}
		}
	}
	for i, p := range d.Providers {
		if k, ok := p.Kind.(fake.Kind); ok && embeds[p.Name] {
			k.Analyzer = analysis.English{}
			d.Providers[i].Kind = k
		}
	}
}

// ModelSpec spells a pinned IR model as the gateway's description.
func ModelSpec(m *ir.Model) gateway.ModelSpec {
	s := gateway.ModelSpec{
		ID:              m.ID,
		Provider:        m.Provider,
		Kind:            gateway.ModelKind(m.Kind),
		ContextWindow:   m.ContextWindow,
		MaxOutputTokens: m.MaxOutputTokens,
		Dimensions:      m.Dimensions,
		Cost:            gateway.CostProfile{InputPer1kUSD: m.Cost.InputPer1kUSD, OutputPer1kUSD: m.Cost.OutputPer1kUSD},
	}
	if m.API != "" && m.API != "chat" {
		s.API = m.API
	}
	// The description owns its prices, apart from the document.
	s.Cost.CachedInputPer1kUSD = copyPrice(m.Cost.CachedInputPer1kUSD)
	s.Cost.CacheWrite5mPer1kUSD = copyPrice(m.Cost.CacheWrite5mPer1kUSD)
	s.Cost.CacheWrite1hPer1kUSD = copyPrice(m.Cost.CacheWrite1hPer1kUSD)
	for _, c := range m.Capabilities {
		s.Capabilities = append(s.Capabilities, gateway.Capability(c))
	}
	return s
}

// promptCache lowers an agent's caching policy; nil is mode "auto".
func promptCache(p *ir.PromptCache) gateway.PromptCache {
	if p == nil {
		p = &ir.PromptCache{Mode: "auto", TTL: string(gateway.CacheTTL5m)}
	}
	out := gateway.PromptCache{TTL: gateway.CacheTTL(p.TTL)}
	switch p.Mode {
	case "off":
		return gateway.PromptCache{}
	case "explicit":
		out.Tools = slices.Contains(p.At, "tools")
		out.System = slices.Contains(p.At, "system")
		out.History = slices.Contains(p.At, "history")
	default:
		out.Tools, out.System, out.History = true, true, true
	}
	return out
}

// copyPrice returns a copy of an optional price.
func copyPrice(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func tool(t *ir.Tool) (app.Tool, error) {
	out := app.Tool{
		Decl: agents.Tool{
			Name:                t.Name,
			Description:         t.Description,
			Input:               slices.Clone(t.Input),
			Effects:             agents.Effects(t.Effects),
			Approval:            agents.Approval(t.Approval),
			Timeout:             t.Timeout.Std(),
			MaxObservationBytes: t.MaxObservationBytes,
		},
	}
	if i := t.Implementation; i != nil { // nil: the schema's default, go
		k, err := decodeKind(ToolKinds, kind.Tools, i.Kind, i.Config)
		if err != nil {
			return app.Tool{}, fmt.Errorf("tool %q: %w", t.Name, err)
		}
		out.Kind = k
	}
	return out, nil
}

func agent(a *ir.Agent) agents.Agent {
	out := agents.Agent{
		Name:              a.Name,
		Description:       a.Description,
		Model:             a.Model,
		Ladder:            slices.Clone(a.Ladder),
		OnBudgetExhausted: agents.OnBudgetExhausted(a.OnBudgetExhausted),
		Instructions:      a.Instructions,
		Tools:             slices.Clone(a.Tools),
		Handoffs:          slices.Clone(a.Handoffs),
		Delegates:         slices.Clone(a.Delegates),
		Retrievers:        slices.Clone(a.Retrievers),
		Skills:            slices.Clone(a.Skills),
		Fallbacks:         slices.Clone(a.Fallbacks),
		MaxSteps:          a.MaxSteps,
		Budget:            a.Budget,
		Output:            slices.Clone(a.Output),
	}
	if a.Temperature != nil {
		t := *a.Temperature
		out.Temperature = &t
	}
	out.Timeouts = timeouts(a.Timeouts)
	out.PromptCache = promptCache(a.PromptCache)
	if c := a.Compaction; c != nil {
		out.Compaction = &agents.Compaction{Trigger: c.Trigger, KeepTurns: c.KeepTurns, Model: c.Model, SummaryTokens: c.SummaryTokens, Instructions: c.Instructions}
	}
	if len(a.Guardrails) > 0 {
		// The schema's default is an empty list; a description without
		// guardrails leaves them out, as its generated literal does.
		out.Guardrails = slices.Clone(a.Guardrails)
	}
	if m := a.Memory; m != nil {
		out.Memory = &agents.Memory{}
		if m.Thread != nil {
			out.Memory.ThreadTokenBudget = m.Thread.TokenBudget
		}
		if m.User != nil {
			out.Memory.User = &agents.StoredMemory{Store: m.User.Store, TokenBudget: m.User.TokenBudget}
		}
		if m.Global != nil {
			out.Memory.Global = &agents.StoredMemory{Store: m.Global.Store, TokenBudget: m.Global.TokenBudget}
		}
	}
	return out
}

func timeouts(t *ir.Timeouts) agents.Timeouts {
	if t == nil {
		return agents.Timeouts{}
	}
	return agents.Timeouts{Run: t.Run.Std(), Step: t.Step.Std()}
}

// Evals lowers a document's evals, in its order, for
// runtime/app/appeval: they are not part of the description (Document),
// since a service runs none.
func Evals(doc *ir.Document) []appeval.Eval {
	var out []appeval.Eval
	for _, e := range doc.Evals {
		out = append(out, evalSpec(e))
	}
	return out
}

func evalSpec(e *ir.Eval) appeval.Eval {
	out := appeval.Eval{
		Name:    e.Name,
		Dataset: e.Dataset,
		Target: appeval.EvalTarget{
			Agent:     e.Target.Agent,
			Model:     e.Target.Model,
			Prompt:    e.Target.Prompt,
			System:    e.Target.System,
			Fallbacks: slices.Clone(e.Target.Fallbacks),
			Retriever: e.Target.Retriever,
			K:         e.Target.K,
		},
		Runs:        e.Runs,
		Concurrency: e.Concurrency,
		Metrics:     slices.Clone(e.Metrics),
		Schema:      slices.Clone(e.Schema),
		Budget:      e.Budget,
		Baseline:    e.Baseline,
		Approvals:   eval.Approvals(e.Approvals),
	}
	if r := e.FromRuns; r != nil {
		out.FromRuns = &eval.RunsSource{File: r.File, DSNEnv: r.DSNEnv, Tenant: r.Tenant, Agent: r.Agent, Statuses: slices.Clone(r.Statuses),
			Since: r.Since, Until: r.Until, Sample: r.Sample, Seed: uint64(r.Seed), Redact: slices.Clone(r.Redact)}
	}
	for _, name := range slices.Sorted(maps.Keys(e.Tools)) {
		t := e.Tools[name]
		et := appeval.EvalTool{Tool: name, Mode: eval.ToolMode(t.Mode), Result: slices.Clone(t.Result)}
		if t.Fixture != "" {
			et.Stub = fixture.Kind{File: t.Fixture}
		}
		out.Tools = append(out.Tools, et)
	}
	if e.Judge != nil {
		out.Judge = &appeval.Judge{Model: e.Judge.Model, Rubric: e.Judge.Rubric, Fallbacks: slices.Clone(e.Judge.Fallbacks)}
		if c := e.Judge.Calibration; c != nil {
			out.Judge.Calibration = &eval.CalibrationSource{Labels: c.Labels, MinYouden: c.MinYouden}
		}
	}
	for _, t := range e.Thresholds {
		th := eval.Threshold{Metric: t.Metric, MaxRegression: t.MaxRegression, Alpha: t.Alpha}
		if t.MinMean != nil {
			m := *t.MinMean
			th.MinMean = &m
		}
		if t.FailBelow != nil {
			f := *t.FailBelow
			th.FailBelow = &f
		}
		out.Thresholds = append(out.Thresholds, th)
	}
	return out
}

// ranking spells a retriever's retrieval block as the runtime's ranking.
func ranking(r ir.Retrieval) retrieval.Ranking {
	return retrieval.Ranking{
		Mode: r.Mode, Fusion: r.Fusion, RRFK: r.RRFK,
		VectorWeight: r.Weights.Vector, LexicalWeight: r.Weights.Lexical,
		Depth: r.Depth, Collapse: r.Collapse,
		BM25: retrieval.BM25{K1: r.BM25.K1, B: r.BM25.B},
	}
}

// state lowers where a service keeps its state.
func state(s ir.State) app.State {
	out := app.State{Kind: s.Kind, DSNEnv: s.DSNEnv}
	if r := s.Retention; r != nil {
		out.Retention = agents.Retention{Finished: r.Finished.Std(), MaxFinished: r.MaxFinished, Paused: r.Paused.Std()}
	}
	return out
}

// expose lowers the aliases a service serves directly, in the order listed.
func expose(x *ir.Expose) app.Expose {
	if x == nil {
		return app.Expose{}
	}
	out := app.Expose{Budget: x.Budget, Aliases: make([]app.ExposedAlias, len(x.Aliases))}
	for i, a := range x.Aliases {
		out.Aliases[i] = app.ExposedAlias{Alias: a, Fallbacks: slices.Clone(x.Fallbacks[a])}
	}
	return out
}
