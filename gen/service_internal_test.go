package gen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/retrieval"
)

// TestMainFileOptions checks that main.go passes serve.Main exactly the
// options the application needs: the PostgreSQL openers (which link pgx)
// only when state or a store lives there, the business package only with
// go tools.
func TestMainFileOptions(t *testing.T) {
	pgStore := []retrieval.StoreConfig{{Name: "kb", Kind: retrieval.StorePGVector}}
	memStore := []retrieval.StoreConfig{{Name: "kb", Kind: retrieval.StoreMemory}}
	pgState := app.Service{State: app.State{Kind: app.StatePostgres, DSNEnv: "DATABASE_URL"}}
	for _, c := range []struct {
		name     string
		desc     app.Description
		tools    bool
		want     []string
		wantNone []string
	}{
		{name: "memory", desc: app.Description{Stores: memStore}, want: []string{"serve.Options{}"}, wantNone: []string{"postgres", "business", "pgqueue"}},
		{name: "tools", desc: app.Description{}, tools: true, want: []string{"Implementations: business.Implementations()"}, wantNone: []string{"postgres", "pgqueue"}},
		{name: "pg state", desc: app.Description{Service: pgState}, want: []string{"Postgres: postgres.Open", `"github.com/aidgen/aid/runtime/serve/postgres"`, "Jobs:     pgqueue.OpenQueue", `"github.com/aidgen/aid/runtime/jobs/pgqueue"`}, wantNone: []string{"business"}},
		{name: "pgvector", desc: app.Description{Stores: pgStore}, want: []string{"Postgres: postgres.Open"}, wantNone: []string{"business", "pgqueue"}},
		{name: "both", desc: app.Description{Stores: pgStore, Service: pgState}, tools: true, want: []string{"Postgres:        postgres.Open", "Implementations: business.Implementations()", "Jobs:            pgqueue.OpenQueue"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.desc.Name, c.desc.Version = "x", "0.1.0"
			got := fmt.Sprintf("%#v", mainFile(c.desc, "x", c.tools))
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
