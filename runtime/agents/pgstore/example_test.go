package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// Replicas that open the same database share runs and memory: a run one
// pauses for approval, any other resumes by its id. (It needs a database,
// so it is compiled but not run by go test.)
func Example() {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	notes, err := store.Memory("notes")
	if err != nil {
		log.Fatal(err)
	}
	p, _ := fake.New(fake.Config{Script: []fake.Step{
		{ToolCalls: []gateway.ToolCall{{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"order":"A-1"}`)}}},
		{Text: "Refunded order A-1."},
	}})
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "fake-small", Provider: "fake",
			MaxOutputTokens: 200, Capabilities: []gateway.Capability{gateway.CapabilityTools}}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		log.Fatal(err)
	}
	rt, err := agents.New(agents.Config{
		Gateway:      gw,
		Store:        store,
		MemoryStores: map[string]agents.MemoryStore{"notes": notes},
		Agents: []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"refund"},
			Memory: &agents.Memory{User: &agents.StoredMemory{Store: "notes"}}}},
		Tools: []agents.Tool{{Name: "refund", Description: "Refund an order.", Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}},
		Implementations: map[string]agents.Implementation{"refund": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
			return "refunded", nil
		})},
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := rt.Run(ctx, "desk", "Please refund order A-1.", agents.RunOptions{UserID: "u1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status) // paused: the refund waits for a human
	// Later, in this replica or any other on the same database:
	res, err = rt.Resume(ctx, res.RunID, agents.Decision{Action: agents.Approve})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Status, res.Answer)
}
