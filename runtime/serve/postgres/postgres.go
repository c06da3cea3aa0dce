package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/pgutil"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// Open sets the openers of o for everything an application keeps in
// PostgreSQL: its state (runs, checkpoints and the budget ledger:
// o.OpenState), agents' user and global memory in a pgvector store
// (o.MemoryStoreOpeners) and retrievers' pgvector stores
// (o.VectorStoreOpeners). It is the one place a process opens PostgreSQL,
// used by generated services (serve.Options.Postgres) and by aidgen run
// and index alike.
//
// Each DSN gets one pool for the state and memory on it, shared by the run
// store, the ledger and the memory stores, and one for the vector stores
// on it, whose connections register pgvector's types. A pool's size is the
// DSN's pool_max_conns, or pgutil.DefaultMaxConns. ctx bounds connecting
// and migrating. The returned function closes every pool; call it once
// nothing uses the stores any more.
func Open(ctx context.Context, o *app.Options) (close func()) {
	s := &state{ctx: ctx, runs: map[string]*pgstore.Store{}, ledgers: map[string]*pgledger.Ledger{}, pools: map[string]*pgxpool.Pool{}}
	vectors := pgvector.NewConnector(ctx, 0)
	o.OpenState = s.openState
	if o.VectorStoreOpeners == nil {
		o.VectorStoreOpeners = map[string]retrieval.StoreOpener{}
	}
	o.VectorStoreOpeners[retrieval.StorePGVector] = vectors.Open
	if o.MemoryStoreOpeners == nil {
		o.MemoryStoreOpeners = map[string]app.MemoryStoreOpener{}
	}
	o.MemoryStoreOpeners[retrieval.StorePGVector] = s.openMemory
	return func() {
		vectors.Close()
		s.close()
	}
}

// state holds the pools of the state and memory, one per DSN.
type state struct {
	ctx     context.Context
	mu      sync.Mutex
	closed  bool
	pools   map[string]*pgxpool.Pool
	runs    map[string]*pgstore.Store
	ledgers map[string]*pgledger.Ledger
}

// pool returns the pool of dsn, opening it on first use. s.mu is held.
func (s *state) pool(dsn string) (*pgxpool.Pool, error) {
	if s.closed {
		return nil, errors.New("the PostgreSQL state is closed")
	}
	if p, ok := s.pools[dsn]; ok {
		return p, nil
	}
	cfg, err := pgutil.PoolConfig(dsn)
	if err != nil {
		return nil, err
	}
	p, err := pgxpool.NewWithConfig(s.ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	s.pools[dsn] = p
	return p, nil
}

// store returns the run store of dsn, which also keeps memory. s.mu is
// held.
func (s *state) store(ctx context.Context, dsn string) (*pgstore.Store, error) {
	if st, ok := s.runs[dsn]; ok {
		return st, nil
	}
	p, err := s.pool(dsn)
	if err != nil {
		return nil, err
	}
	st, err := pgstore.New(ctx, p)
	if err != nil {
		return nil, err
	}
	s.runs[dsn] = st
	return st, nil
}

// openState is an app.Options.OpenState.
func (s *state) openState(ctx context.Context, dsn string) (agents.Store, gateway.Ledger, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.store(ctx, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the run store: %w", err)
	}
	l, ok := s.ledgers[dsn]
	if !ok {
		p, err := s.pool(dsn)
		if err != nil {
			return nil, nil, fmt.Errorf("opening the budget ledger: %w", err)
		}
		if l, err = pgledger.New(p); err == nil {
			err = l.Migrate(ctx)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("opening the budget ledger: %w", err)
		}
		s.ledgers[dsn] = l
	}
	return st, l, nil
}

// openMemory is an app.MemoryStoreOpener: the store's rows live in the
// pgstore tables of the database its DSN names.
func (s *state) openMemory(ctx context.Context, cfg retrieval.StoreConfig, dsn string) (agents.MemoryStore, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.store(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("opening memory store %s: %w", cfg.Name, err)
	}
	return st.Memory(cfg.Name)
}

// close closes every pool; the stores on them stop working.
func (s *state) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pools {
		p.Close()
	}
	s.pools, s.runs, s.ledgers, s.closed = nil, nil, nil, true
}
