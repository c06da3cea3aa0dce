package lower_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
)

var update = flag.Bool("update", false, "rewrite the golden descriptions under testdata")

// TestValidDocumentsAssemble lowers every valid IR case and both examples,
// compares the description with its golden (testdata/<case>.json; -update
// rewrites them), and assembles it. Applications whose agents search a
// retriever stop at the agents runtime's DeferredError for retrievers, the
// one feature it does not build yet; everything before it (gateway, tools,
// memory, retrievers, state) has been built by then.
func TestValidDocumentsAssemble(t *testing.T) {
	ir := "../../testdata/ir/valid/"
	tests := []struct {
		name, path string
		deferred   string // the Feature of the expected DeferredError
	}{
		{"minimal", ir + "minimal.cue", ""},
		{"evals", ir + "evals.cue", ""},
		{"tools", ir + "tools.cue", ""},
		{"openai", ir + "openai.cue", ""},
		{"run-control", ir + "run-control.cue", ""},
		{"capitals", capitals, ""},
		{"support-desk", supportDesk, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := load(t, tt.path)
			desc, err := lower.Document(doc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(desc, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", tt.name+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("lowering %s differs from %s (run go test -update to accept):\n%s", tt.path, golden, got)
			}

			env := map[string]string{"OPENAI_API_KEY": "sk-test", "DATABASE_URL": "postgres://test", "NOTIFY_TOKEN": "t"}
			opts := app.Options{
				RunStore: agents.NewInMemoryStore(),
				Ledger:   gateway.NewMemoryLedger(),
				VectorStoreOpeners: map[string]retrieval.StoreOpener{"pgvector": func(cfg retrieval.StoreConfig, dims int) (retrieval.VectorStore, error) {
					return retrieval.NewMemoryStore(dims, cfg.Distance)
				}},
				MemoryStoreOpeners: map[string]app.MemoryStoreOpener{"pgvector": func(ctx context.Context, cfg retrieval.StoreConfig, dsn string) (agents.MemoryStore, error) {
					return agents.NewInMemoryMemory(), nil
				}},
				Implementations: map[string]agents.Implementation{},
				LookupEnv:       func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			}
			for _, tool := range desc.Tools {
				if tool.Implementation.Kind == "" || tool.Implementation.Kind == app.ToolGo {
					opts.Implementations[tool.Decl.Name] = agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "ok", nil })
				}
			}
			a, err := app.Assemble(context.Background(), desc, opts)
			if tt.deferred != "" {
				var d *gateway.DeferredError
				if !errors.As(err, &d) || !strings.Contains(d.Feature, tt.deferred) {
					t.Fatalf("Assemble = %v, want a DeferredError for %s", err, tt.deferred)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.name == "tools" {
				// The fake plays the script the IR names, and the lookup
				// is answered by the fixture the IR names.
				res, err := a.Agents.Run(t.Context(), "desk", "Where is A1?", agents.RunOptions{})
				if err != nil || res.Answer != "Order A1 has shipped." || !strings.Contains(res.Steps[0].ToolCalls[0].Observation, `"status":"shipped"`) {
					t.Fatalf("run: %+v %v", res, err)
				}
			}
			for _, name := range a.EvalNames() {
				if _, err := a.Eval(name); err != nil {
					t.Errorf("Eval(%s): %v", name, err)
				}
			}
		})
	}
}
