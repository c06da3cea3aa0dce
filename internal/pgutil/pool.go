package pgutil

import (
	"fmt"
	"net/url"
	"regexp"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxConns is the size of a pool whose DSN does not say
// (pool_max_conns): four connections per processor the process may use,
// and never fewer than eight. pgx's own default, max(4, NumCPU), suits a
// command, not a service: a step of a run holds a connection only for
// its few writes, but a hundred runs at once on four connections spend
// most of their store time waiting for one (BenchmarkConcurrentRuns in
// runtime/agents/pgstore).
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
