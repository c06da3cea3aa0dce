package pgvector

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
)

// DefaultDSNEnv is the environment variable a store's DSN is read from when
// its configuration names none, as in the IR's default.
const DefaultDSNEnv = "DATABASE_URL"

// Kind is the configuration of a store of kind pgvector, as the IR spells it
// (stores: NAME: {kind: "pgvector", dsnEnv, table}; the distance is every
// store's, retrieval.StoreConfig.Distance). It is plain data, so a
// generated service holds it as a literal and links pgx only then.
//
// A pgvector store holds a retriever's vectors (OpenVectorStore: a Store in
// Table) and agents' user and global memory (a retrieval.DatabaseKind: the
// application opens it in pgstore's memory tables of the same database,
// app.Options.OpenMemory). Either way the DSN is read from the environment
// variable DSNEnv. The vector stores of an application share one pool per
// DSN, whose connections register pgvector's types; its memory shares the
// pool of its state on the DSN (pgutil.SharedPool); both close with it
// (kind.Env.Scope).
type Kind struct {
	// DSNEnv names the environment variable holding the PostgreSQL DSN;
	// empty means DefaultDSNEnv.
	DSNEnv string `json:"dsnEnv,omitempty"`
	// Table is the table holding the store's rows.
	Table string `json:"table"`
}

// StoreKind implements retrieval.StoreKind.
func (Kind) StoreKind() string { return kind.StorePGVector }

// String says where the store's rows are, for messages: "pgvector table
// kb_chunks".
func (k Kind) String() string { return "pgvector table " + k.Table }

// InMemory implements retrieval.StoreKind: the rows outlive the process.
func (Kind) InMemory() bool { return false }

// OpenVectorStore implements retrieval.StoreKind: the store in Table, of
// width dims and distance d, creating the table or checking that it has
// them.
func (k Kind) OpenVectorStore(ctx context.Context, env kind.Env, name string, d retrieval.Distance, dims int) (retrieval.VectorStore, error) {
	dsn, env2, err := k.dsn(env, name)
	if err != nil {
		return nil, err
	}
	c, err := kind.Shared(env.Scope, poolsKey{}, func() (*pools, func() error, error) {
		p := &pools{byDSN: map[string]*pgxpool.Pool{}}
		return p, p.close, nil
	})
	if err != nil {
		return nil, err
	}
	pool, err := c.pool(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("pgvector: store %q (DSN from %s): %w", name, env2, err)
	}
	return New(ctx, pool, Config{Table: k.Table, Dimensions: dims, Distance: d})
}

// DatabaseDSN implements retrieval.DatabaseKind: the DSN of the store's
// database, from the environment variable DSNEnv.
func (k Kind) DatabaseDSN(env kind.Env, store string) (string, error) {
	dsn, _, err := k.dsn(env, store)
	return dsn, err
}

// dsn reads the store's DSN from the environment, and returns the variable
// it read too.
func (k Kind) dsn(env kind.Env, store string) (dsn, variable string, err error) {
	variable = k.DSNEnv
	if variable == "" {
		variable = DefaultDSNEnv
	}
	dsn, ok := env.Lookup(variable)
	if !ok || dsn == "" {
		return "", variable, fmt.Errorf("pgvector: the environment variable %s, which holds the DSN of store %q, is not set", variable, store)
	}
	return dsn, variable, nil
}

// poolsKey keeps an application's vector pools in its scope.
type poolsKey struct{}

// pools are the connection pools of an application's pgvector stores, one
// per DSN, shared by the stores on it.
type pools struct {
	mu     sync.Mutex
	byDSN  map[string]*pgxpool.Pool
	closed bool
}

// pool returns the pool of dsn, opening it on first use; ctx bounds the
// connecting.
func (p *pools) pool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("the application's pools are closed")
	}
	if pool, ok := p.byDSN[dsn]; ok {
		return pool, nil
	}
	pool, err := connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	p.byDSN[dsn] = pool
	return pool, nil
}

// close closes every pool; the stores on them stop working.
func (p *pools) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pool := range p.byDSN {
		pool.Close()
	}
	p.byDSN, p.closed = nil, true
	return nil
}
