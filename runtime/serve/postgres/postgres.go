package postgres

import (
	"context"
	"fmt"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/service"
	"github.com/aidgen/aid/runtime/service/pgkeys"
)

// OpenKeys opens the API keys created at run time (aidgen keys create) in
// the database at dsn, on the pool the application's state shares
// (pgkeys.Shared). It is a serve.Options.OpenKeys.
func OpenKeys(ctx context.Context, env kind.Env, dsn string) (service.KeyStore, error) {
	return pgkeys.Shared(ctx, env.Scope, dsn)
}

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

// OpenMemory opens the agents' memory named store in the PostgreSQL
// database at dsn, the database of a pgvector store: pgstore's memory
// tables there, in the application's pgstore on the DSN (pgstore.Shared),
// whose pool its state on that DSN shares. It is an app.Options.OpenMemory,
// and serve.Options.OpenMemory.
func OpenMemory(ctx context.Context, env kind.Env, dsn, store string) (agents.MemoryStore, error) {
	s, err := pgstore.Shared(ctx, env.Scope, dsn)
	if err != nil {
		return nil, fmt.Errorf("opening memory store %s: %w", store, err)
	}
	return s.Memory(store)
}
