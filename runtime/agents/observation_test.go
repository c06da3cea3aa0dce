package agents_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aidgen/aid/runtime/agents"
	toolhttp "github.com/aidgen/aid/runtime/agents/tools/http"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
)

// TestObservationBound checks that every observation, whatever produced
// it, is cut to its tool's bound with a marker, that the run goes on to
// its answer on the model's 8,000-token context, and that the model, the
// result, the stored call records and the checkpoint all hold the cut text.
func TestObservationBound(t *testing.T) {
	huge := strings.Repeat("é", 5<<20) // 10 MiB, two bytes a rune: a cut may fall inside one
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		// All the http tool reads (a longer body is an error), far past
		// the observation's bound.
		_, _ = io.WriteString(w, strings.Repeat("w", toolhttp.DefaultMaxResponseBytes))
	}))
	t.Cleanup(web.Close)
	httpImpl, err := toolhttp.New(web.URL, toolhttp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	searcher := agents.SearchFunc(func(context.Context, string, int) ([]retrieval.Hit, error) {
		return []retrieval.Hit{{Chunk: retrieval.Chunk{Source: "big.md", Text: strings.Repeat("s", 100_000)}, Score: 1}}, nil
	})
	p, err := fake.New(fake.Config{Analyzer: analysis.English{}, Record: true, Script: []fake.Step{
		calls(call("1", "dump", `{"id":"A"}`), call("2", "web", `{"id":"B"}`), call("3", "failing", `{"id":"C"}`),
			call("4", "small", `{"id":"D"}`), call("5", "search_kb", `{"query":"q"}`)),
		answer("done"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	// A context of 128,000 tokens holds five bounded observations; without
	// the bound, one would not fit.
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 128_000, MaxOutputTokens: 100,
			Capabilities: []gateway.Capability{gateway.CapabilityTools}}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		t.Fatal(err)
	}
	fx := fixture{gw: gw, fake: p}
	store := agents.NewInMemoryStore()
	rt := newRuntime(t, agents.Config{
		Gateway: fx.gw, Store: store,
		Agents: []agents.Agent{{Name: "a", Model: "small", Tools: []string{"dump", "web", "failing", "small"}, Retrievers: []string{"kb"}}},
		Tools: []agents.Tool{
			{Name: "dump", Description: "d", Input: lookupSchema},
			{Name: "web", Description: "d", Input: lookupSchema},
			{Name: "failing", Description: "d", Input: lookupSchema},
			{Name: "small", Description: "d", Input: lookupSchema, MaxObservationBytes: 2000},
		},
		Implementations: map[string]agents.Implementation{
			"dump": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return huge, nil }),
			"web":  httpImpl,
			"failing": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
				return "", &kind.DeferredError{Feature: strings.Repeat("an error as long as a book ", 100_000)}
			}),
			"small": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return huge, nil }),
		},
		Retrievers: map[string]agents.Searcher{"kb": searcher},
	})
	res, err := rt.Run(t.Context(), "a", "go", agents.RunOptions{})
	if err != nil || res.Status != agents.StatusCompleted || res.Answer != "done" {
		t.Fatalf("the run did not reach its answer: %s %q %v", res.Status, res.Answer, err)
	}
	want := map[string]struct {
		limit int
		total int
	}{
		"dump":      {agents.DefaultMaxObservationBytes, len(huge)},
		"web":       {agents.DefaultMaxObservationBytes, toolhttp.DefaultMaxResponseBytes},
		"failing":   {agents.DefaultMaxObservationBytes, -1},
		"small":     {2000, len(huge)},
		"search_kb": {agents.DefaultMaxObservationBytes, -1},
	}
	check := func(where, tool, obs string) {
		t.Helper()
		w := want[tool]
		if len(obs) > w.limit || !utf8.ValidString(obs) || !strings.Contains(obs, "bytes are not shown]") {
			t.Errorf("%s: %s: %d bytes (limit %d), valid UTF-8 %v, ends %q", where, tool, len(obs), w.limit, utf8.ValidString(obs), obs[max(0, len(obs)-120):])
		}
		if len(obs) < w.limit-100 {
			t.Errorf("%s: %s: cut to %d bytes, far below its limit %d", where, tool, len(obs), w.limit)
		}
		if w.total > 0 && !strings.HasSuffix(obs, " bytes are not shown]") || w.total > 0 && !strings.Contains(obs, " of its "+itoa(w.total)+" bytes") {
			t.Errorf("%s: %s: the marker does not count the %d bytes: %q", where, tool, w.total, obs[max(0, len(obs)-120):])
		}
	}
	for _, c := range res.Steps[0].ToolCalls {
		check("result", c.Name, c.Observation)
	}
	// The model's second request holds the cut observations.
	reqs := fx.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls", len(reqs))
	}
	names := map[string]string{"1": "dump", "2": "web", "3": "failing", "4": "small", "5": "search_kb"}
	for _, m := range reqs[1].Messages {
		if m.Role == gateway.RoleTool {
			check("request", names[m.ToolCallID], m.Content)
		}
	}
	// So do the stored call records and the checkpoint.
	stored, err := store.Calls(t.Context(), res.RunID)
	if err != nil || len(stored) != 5 {
		t.Fatalf("calls %d, %v", len(stored), err)
	}
	for _, c := range stored {
		check("call record", c.Tool, c.Result.Observation)
	}
	rec, err := store.LoadRun(t.Context(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rec.Checkpoint.Steps[0].ToolCalls {
		check("checkpoint step", c.Name, c.Observation)
	}
	for _, m := range rec.Checkpoint.Messages {
		if m.Role == gateway.RoleTool {
			check("checkpoint message", names[m.ToolCallID], m.Content)
		}
	}
	if b, _ := agents.MarshalCheckpoint(rec.Checkpoint); len(b) > 400_000 {
		t.Errorf("the checkpoint is %d bytes", len(b))
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestObservationBoundRefused checks the bounds of MaxObservationBytes.
func TestObservationBoundRefused(t *testing.T) {
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}})
	for _, n := range []int{-1, agents.MinObservationBytes - 1, agents.MaxObservationBytesLimit + 1} {
		_, err := agents.New(agents.Config{
			Gateway: fx.gw,
			Tools:   []agents.Tool{{Name: "t", Description: "d", MaxObservationBytes: n}},
		})
		if err == nil || !strings.Contains(err.Error(), "maxObservationBytes") {
			t.Errorf("MaxObservationBytes %d: %v", n, err)
		}
	}
}
