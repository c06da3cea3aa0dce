package pgutil_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/internal/pgutil"
)

// TestPoolConfig checks that a DSN's pool_max_conns is honoured, in both
// connection string forms, and that a DSN without it gets DefaultMaxConns
// rather than pgx's default.
func TestPoolConfig(t *testing.T) {
	for _, tt := range []struct {
		dsn  string
		want int32
	}{
		{"postgres://u@db.example/app?sslmode=disable", pgutil.DefaultMaxConns()},
		{"postgres://u@db.example/app?sslmode=disable&pool_max_conns=3", 3},
		{"postgresql://u@db.example/app?pool_max_conns=77", 77},
		{"host=db.example user=u dbname=app", pgutil.DefaultMaxConns()},
		{"host=db.example pool_max_conns=5 user=u", 5},
		{"pool_max_conns = 6 host=db.example", 6},
	} {
		cfg, err := pgutil.PoolConfig(tt.dsn)
		if err != nil {
			t.Fatalf("%s: %v", tt.dsn, err)
		}
		if cfg.MaxConns != tt.want {
			t.Errorf("%s: MaxConns %d, want %d", tt.dsn, cfg.MaxConns, tt.want)
		}
	}
	if pgutil.DefaultMaxConns() < 8 {
		t.Errorf("DefaultMaxConns %d", pgutil.DefaultMaxConns())
	}
	if _, err := pgutil.PoolConfig("postgres://u:hunter2@db.example:notaport/app"); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a bad DSN: %v", err)
	}
}
