package postgres

import (
	"context"
	"fmt"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
	"github.com/aidgen/aid/runtime/kind"
)

// OpenState opens the runs, checkpoints and budget ledger the service's
// replicas share in the PostgreSQL database at dsn: the application's run
// store and ledger on dsn (pgstore.Shared, pgledger.Shared), on the one
// pool its state and the memory of its pgvector stores on that DSN share,
// which closes with the application (env.Scope). It is an
// app.Options.OpenState, and serve.Options.OpenState.
func OpenState(ctx context.Context, env kind.Env, dsn string) (agents.Store, gateway.Ledger, error) {
	store, err := pgstore.Shared(ctx, env.Scope, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the run store: %w", err)
	}
	ledger, err := pgledger.Shared(ctx, env.Scope, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the budget ledger: %w", err)
	}
	return store, ledger, nil
}
