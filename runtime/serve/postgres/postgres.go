package postgres

import (
	"context"
	"fmt"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
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

// VectorStores opens the pgvector stores of the retrievers, each with the
// DSN its store's DSNEnv names, sharing one pool per DSN; ctx bounds every
// connection. The returned function closes the pools: serve.Main calls it
// when the service has stopped. It is a serve.Options.VectorStores.
func VectorStores(ctx context.Context) (map[string]retrieval.StoreOpener, func()) {
	c := pgvector.NewConnector(ctx, 0)
	return map[string]retrieval.StoreOpener{retrieval.StorePGVector: c.Open}, c.Close
}
