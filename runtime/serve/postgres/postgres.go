package postgres

import (
	"context"
	"fmt"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
)

// OpenState opens the runs, checkpoints and budget ledger the service's
// replicas share in the PostgreSQL database at dsn. It is an
// app.Options.OpenState (and serve.Options.OpenState).
func OpenState(ctx context.Context, dsn string) (agents.Store, gateway.Ledger, error) {
	store, err := pgstore.Open(ctx, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the run store: %w", err)
	}
	ledger, err := pgledger.Open(ctx, dsn)
	if err != nil {
		store.Close()
		return nil, nil, fmt.Errorf("opening the budget ledger: %w", err)
	}
	return store, ledger, nil
}
