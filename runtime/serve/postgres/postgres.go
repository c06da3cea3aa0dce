package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/app"
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

// MemoryStores opens the user and global memory that agents keep in a
// pgvector store: the store's rows live in the pgstore tables of the
// database its DSNEnv names, one pool per DSN. The returned function
// closes the pools: serve.Main calls it when the service has stopped. It is
// a serve.Options.MemoryStores.
func MemoryStores(ctx context.Context) (map[string]app.MemoryStoreOpener, func()) {
	var (
		mu    sync.Mutex
		pools = map[string]*pgstore.Store{}
	)
	open := func(ctx context.Context, cfg retrieval.StoreConfig, dsn string) (agents.MemoryStore, error) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := pools[dsn]
		if !ok {
			var err error
			if s, err = pgstore.Open(ctx, dsn); err != nil {
				return nil, fmt.Errorf("opening memory store %s: %w", cfg.Name, err)
			}
			pools[dsn] = s
		}
		return s.Memory(cfg.Name)
	}
	closeAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for dsn, s := range pools {
			s.Close()
			delete(pools, dsn)
		}
	}
	return map[string]app.MemoryStoreOpener{retrieval.StorePGVector: open}, closeAll
}
