package pgledger_test

import (
	"context"
	"log"
	"os"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
)

// Replicas that open the same database share one budget: a reservation in
// one is seen by the others before they spend.
func Example() {
	ctx := context.Background()
	ledger, err := pgledger.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer ledger.Close()
	_, err = gateway.New(gateway.Config{
		// Models and Providers as usual.
		Budgets: []gateway.Budget{{Name: "nightly", MaxUSD: 5, Scope: gateway.ScopeRun}},
		Ledger:  ledger,
	})
	if err != nil {
		log.Fatal(err)
	}
}
