package pgvector

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/pgutil"
	"github.com/aidgen/aid/runtime/retrieval"
)

// DefaultDSNEnv is the environment variable a store's DSN is read from when
// its configuration names none, as in the IR's default.
const DefaultDSNEnv = "DATABASE_URL"

// Connector opens the pgvector stores of a program's configuration for
// retrieval.Build, one pool per DSN shared by the stores on it, and closes
// them all. It is safe for concurrent use.
//
//	c := pgvector.NewConnector(ctx, 0)
//	defer c.Close()
//	rs, err := retrieval.Build(gw, stores, retrievers, retrieval.BuildOptions{
//		Openers: map[string]retrieval.StoreOpener{retrieval.StorePGVector: c.Open},
//	})
type Connector struct {
	// ctx bounds connecting and migrating: retrieval.StoreOpener takes no
	// context of its own.
	ctx      context.Context
	efSearch int
	getenv   func(string) string

	mu     sync.Mutex
	pools  map[string]*pgxpool.Pool
	closed bool
}

// NewConnector returns a connector whose stores search with ef_search
// efSearch (zero means DefaultEFSearch). ctx bounds every connection and
// migration Open makes.
func NewConnector(ctx context.Context, efSearch int) *Connector {
	return &Connector{ctx: ctx, efSearch: efSearch, getenv: os.Getenv, pools: make(map[string]*pgxpool.Pool)}
}

// Open is a retrieval.StoreOpener: it reads the DSN from the environment
// variable cfg.DSNEnv (DefaultDSNEnv when empty) and opens the store in
// cfg.Table with the given width and cfg.Distance.
func (c *Connector) Open(cfg retrieval.StoreConfig, dims int) (retrieval.VectorStore, error) {
	env := cfg.DSNEnv
	if env == "" {
		env = DefaultDSNEnv
	}
	dsn := c.getenv(env)
	if dsn == "" {
		return nil, fmt.Errorf("pgvector: the environment variable %s, which holds the DSN of store %q, is not set", env, cfg.Name)
	}
	pool, err := c.pool(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgvector: store %q (DSN from %s): %w", cfg.Name, env, err)
	}
	return New(c.ctx, pool, Config{Table: cfg.Table, Dimensions: dims, Distance: cfg.Distance, EFSearch: c.efSearch})
}

// pool returns the pool of dsn, opening it on first use.
func (c *Connector) pool(dsn string) (*pgxpool.Pool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("connector is closed")
	}
	if p, ok := c.pools[dsn]; ok {
		return p, nil
	}
	pcfg, err := pgutil.PoolConfig(dsn) // pgx masks the password
	if err != nil {
		return nil, err
	}
	if err := ensureExtension(c.ctx, pcfg.ConnConfig); err != nil {
		return nil, err
	}
	RegisterOnConnect(pcfg)
	p, err := pgxpool.NewWithConfig(c.ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	c.pools[dsn] = p
	return p, nil
}

// Close closes every pool the connector opened; the stores on them stop
// working.
func (c *Connector) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pools {
		p.Close()
	}
	c.pools = nil
	c.closed = true
}
