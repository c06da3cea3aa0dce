package gen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// TestMainFileOptions checks that main.go passes serve.Main exactly the
// options the application needs: the PostgreSQL state opener (which links
// pgx) only when the state lives there, the business package only with go
// tools. A pgvector store needs no option: its kind opens it.
func TestMainFileOptions(t *testing.T) {
	pgStore := []retrieval.StoreConfig{{Name: "kb", Kind: pgvector.Kind{Table: "kb"}}}
	memStore := []retrieval.StoreConfig{{Name: "kb", Kind: memory.Kind{}}}
	pgState := app.Service{State: app.State{Kind: app.StatePostgres, DSNEnv: "DATABASE_URL"}}
	for _, c := range []struct {
		name     string
		desc     app.Description
		tools    bool
		guards   bool
		files    bool
		want     []string
		wantNone []string
	}{
		{name: "memory", desc: app.Description{Stores: memStore}, want: []string{"serve.Options{}"}, wantNone: []string{"postgres", "business", "pgqueue"}},
		{name: "tools", desc: app.Description{}, tools: true, want: []string{"Implementations: business.Implementations()"}, wantNone: []string{"postgres", "pgqueue"}},
		{name: "pg state", desc: app.Description{Service: pgState}, want: []string{"OpenState: postgres.OpenState", `"github.com/aidgen/aid/runtime/serve/postgres"`, "Jobs:      pgqueue.OpenQueue", `"github.com/aidgen/aid/runtime/jobs/pgqueue"`}, wantNone: []string{"VectorStores", "business"}},
		{name: "pgvector", desc: app.Description{Stores: pgStore}, want: []string{"serve.Options{}"}, wantNone: []string{"postgres", "pgqueue"}},
		{name: "both", desc: app.Description{Stores: pgStore, Service: pgState}, tools: true, want: []string{"OpenState:       postgres.OpenState", "Implementations: business.Implementations()", "Jobs:            pgqueue.OpenQueue"}},
		{name: "go guardrails", desc: app.Description{}, guards: true, want: []string{"GuardrailFuncs: business.GuardrailFuncs()"}, wantNone: []string{"Implementations"}},
		{name: "files", desc: app.Description{}, files: true, want: []string{"//go:embed all:app\nvar appFiles embed.FS", "Files: appFiles"}, wantNone: []string{"postgres", "pgqueue"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.desc.Name, c.desc.Version = "x", "0.1.0"
			got := fmt.Sprintf("%#v", mainFile(c.desc, "x", c.tools, c.guards, c.files))
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("main.go lacks %q:\n%s", w, got)
				}
			}
			for _, w := range c.wantNone {
				if strings.Contains(got, w) {
					t.Errorf("main.go has %q:\n%s", w, got)
				}
			}
		})
	}
}
