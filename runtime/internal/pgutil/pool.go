package pgutil

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/runtime/kind"
)

// DefaultMaxConns is the size of a pool whose DSN does not say
// (pool_max_conns): four connections per processor the process may use,
// and never fewer than eight. pgx's own default, max(4, NumCPU), suits a
// command, not a service: with 100 runs in flight on two processors,
// BenchmarkConcurrentRuns (runtime/agents/pgstore) measured about 10 % of
// the store's time waiting for one of four connections, and 0.3 to 1.4 %
// with eight. Many more do not help when the database is the bottleneck:
// the wait moves into PostgreSQL. Replicas times pool size must stay
// under the server's max_connections; set pool_max_conns to say so.
func DefaultMaxConns() int32 {
	return int32(max(8, 4*runtime.GOMAXPROCS(0)))
}

// PoolConfig parses dsn into a pool configuration: pgx's, with
// DefaultMaxConns when the DSN does not set pool_max_conns. Every pool the
// stores open goes through it, so that a DSN's pool_max_conns (and the
// other pool_ parameters pgxpool reads) is honoured everywhere alike.
func PoolConfig(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err) // pgx masks the password
	}
	if !setsMaxConns(dsn) {
		cfg.MaxConns = DefaultMaxConns()
	}
	return cfg, nil
}

var keywordMaxConns = regexp.MustCompile(`(^|\s)pool_max_conns\s*=`)

// setsMaxConns reports whether dsn, a URL or keyword/value connection
// string, sets pool_max_conns.
func setsMaxConns(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		return err == nil && u.Query().Has("pool_max_conns")
	}
	return keywordMaxConns.MatchString(dsn)
}

// poolKey keeps an application's pool of one DSN in its scope.
type poolKey struct{ dsn string }

// SharedPool returns the application's pool on dsn (PoolConfig's), opened
// on first use and closed with scope: the one pool its run store, budget
// ledger and memory on that DSN share (pgstore.Shared, pgledger.Shared),
// whichever opens first. ctx bounds the connecting.
func SharedPool(ctx context.Context, scope *kind.Scope, dsn string) (*pgxpool.Pool, error) {
	return kind.Shared(scope, poolKey{dsn}, func() (*pgxpool.Pool, func() error, error) {
		cfg, err := PoolConfig(dsn)
		if err != nil {
			return nil, nil, err
		}
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("connect: %w", err)
		}
		return p, func() error { p.Close(); return nil }, nil
	})
}
