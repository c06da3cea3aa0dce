package agentstoretest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
)

// testListRuns checks RunLister: tenants are walls, a key's filter and a
// status filter hold, pages are newest first and cover every run once,
// and a cursor the store did not make is refused.
func testListRuns(t *testing.T, l agents.RunLister, s agents.Store) {
	ctx := context.Background()
	type run struct {
		key, tenant string
		status      agents.Status
	}
	var want []string // acme's runs, in creation order
	for i, r := range []run{
		{"frontend", "acme", agents.StatusCompleted}, {"frontend", "acme", agents.StatusPaused},
		{"other", "globex", agents.StatusPaused}, {"second", "acme", agents.StatusRunning},
		{"frontend", "acme", agents.StatusRunning}, {"", "", agents.StatusCompleted},
	} {
		id := fmt.Sprintf("run_%032x", i+1)
		cp := checkpoint(id)
		cp.Key, cp.Tenant = r.key, r.tenant
		rec, err := s.CreateRun(ctx, agents.RunRecord{RunID: id, Agent: "triage", Status: r.status, Checkpoint: cp})
		if err != nil {
			t.Fatal(err)
		}
		if rec.CreatedAt.IsZero() {
			t.Fatalf("CreateRun returned no CreatedAt")
		}
		if r.tenant == "acme" {
			want = append(want, id)
		}
	}
	slices.Reverse(want) // newest first
	ids := func(f agents.RunFilter) []string {
		t.Helper()
		var got []string
		for {
			page, err := l.ListRuns(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Runs) > f.Limit && f.Limit > 0 {
				t.Fatalf("a page of %d runs, over its limit %d", len(page.Runs), f.Limit)
			}
			for _, r := range page.Runs {
				got = append(got, r.RunID)
			}
			if page.Next == "" {
				return got
			}
			f.After = page.Next
		}
	}
	// Created within the same microsecond, runs are ordered by id: the
	// order is the store's, so compare as sets where time ties may occur,
	// and check the order is the one the cursor pages in.
	all := ids(agents.RunFilter{Tenant: "acme", Limit: 100})
	if !sameSet(all, want) {
		t.Fatalf("acme's runs: got %v, want %v", all, want)
	}
	if paged := ids(agents.RunFilter{Tenant: "acme", Limit: 1}); !slices.Equal(paged, all) {
		t.Fatalf("paged one by one: got %v, want %v (the order of one page)", paged, all)
	}
	if got := ids(agents.RunFilter{Tenant: "globex"}); len(got) != 1 || got[0] != fmt.Sprintf("run_%032x", 3) {
		t.Fatalf("globex's runs: %v", got)
	}
	if got := ids(agents.RunFilter{Tenant: "acme", Key: "frontend", Statuses: []agents.Status{agents.StatusPaused, agents.StatusRunning}}); !sameSet(got, []string{fmt.Sprintf("run_%032x", 2), fmt.Sprintf("run_%032x", 5)}) {
		t.Fatalf("frontend's paused and running runs: %v", got)
	}
	if got := ids(agents.RunFilter{AllTenants: true, Limit: 2}); len(got) != 6 {
		t.Fatalf("every tenant's runs: %v", got)
	}
	var bad *agents.InvalidOptionError
	if _, err := l.ListRuns(ctx, agents.RunFilter{Tenant: "acme", After: "not-a-cursor"}); !errors.As(err, &bad) {
		t.Fatalf("a bad cursor: %v, want *agents.InvalidOptionError", err)
	}
	if _, err := l.ListRuns(ctx, agents.RunFilter{Limit: agents.MaxListRuns + 1}); !errors.As(err, &bad) {
		t.Fatalf("a limit over the maximum: %v, want *agents.InvalidOptionError", err)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
