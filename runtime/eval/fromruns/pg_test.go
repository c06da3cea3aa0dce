package fromruns_test

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/eval/fromruns"
)

// TestListPostgres: runs stored in PostgreSQL become cases, their input,
// answer and tool calls as an exported log's would; a tenant filter keeps
// that tenant's runs alone; a redaction pattern never reaches the written
// dataset.
func TestListPostgres(t *testing.T) {
	ctx := context.Background()
	s, err := pgstore.New(ctx, pgtest.NewPool(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, tenant := range []string{"acme", "globex", "acme"} {
		id := fmt.Sprintf("run_%032x", i+1)
		input := fmt.Sprintf("Where is order %d? Mail user%d@example.com", i, i)
		cp := agents.Checkpoint{
			Version: agents.CheckpointVersion, RunID: id, Agent: "desk", Path: []string{"desk"}, Key: "frontend", Tenant: tenant,
			Messages: []agents.SavedMessage{{Role: "user", Content: input}},
			Steps: []agents.StepRecord{
				{Number: 1, Agent: "desk", ToolCalls: []agents.ToolCallRecord{{ID: "c1", Name: "lookup", Arguments: fmt.Sprintf(`{"email": "user%d@example.com"}`, i), Observation: "shipped"}}},
				{Number: 2, Agent: "desk", Text: fmt.Sprintf("Shipped; I wrote to user%d@example.com.", i)},
			},
		}
		if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: id, Agent: "desk", Status: agents.StatusCompleted, Checkpoint: cp}); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := fromruns.List(ctx, s, agents.RunFilter{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := fromruns.Dataset("d", recs, fromruns.Options{Redact: []*regexp.Regexp{regexp.MustCompile(`[a-z0-9.]+@[a-z0-9.]+\.[a-z]+`)}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range ds.Cases {
		ids = append(ids, c.ID)
	}
	if want := []string{fmt.Sprintf("run_%032x", 1), fmt.Sprintf("run_%032x", 3)}; !slices.Equal(ids, want) {
		t.Fatalf("acme's cases %v, want %v", ids, want)
	}
	c := ds.Cases[0]
	if c.Input != "Where is order 0? Mail [redacted]" || c.Expected != "Shipped; I wrote to [redacted]." ||
		len(c.Tools) != 1 || string(c.Tools[0].Args) != `{"email":"[redacted]"}` {
		t.Errorf("case %+v", c)
	}
	var out bytes.Buffer
	if err := fromruns.WriteJSONL(&out, ds); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "@example.com") {
		t.Errorf("an address reached the dataset: %s", out.String())
	}
	all, err := fromruns.List(ctx, s, agents.RunFilter{AllTenants: true})
	if err != nil || len(all) != 3 {
		t.Fatalf("every tenant's runs: %d, %v", len(all), err)
	}
	if _, err := fromruns.List(ctx, s, agents.RunFilter{Tenant: "initech"}); err == nil {
		t.Fatal("a tenant with no run gave no error")
	}
}
