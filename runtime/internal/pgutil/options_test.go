package pgutil_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/internal/pgutil"
)

func TestCheckTablePrefix(t *testing.T) {
	tests := []struct {
		prefix string
		ok     bool
	}{
		{"aid_budget", true},
		{"_x", true},
		{"a1", true},
		{strings.Repeat("a", 41), true},
		{strings.Repeat("a", 42), false},
		{"", false},
		{"1abc", false},
		{"Aid", false},
		{"aid-budget", false},
		{"aid budget", false},
		{`aid"; DROP TABLE x; --`, false},
		{"aid\x00", false},
		{"été", false},
	}
	for _, tt := range tests {
		err := pgutil.CheckTablePrefix(tt.prefix)
		if (err == nil) != tt.ok {
			t.Errorf("CheckTablePrefix(%q) = %v, want ok %v", tt.prefix, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "invalid table prefix") {
			t.Errorf("CheckTablePrefix(%q) = %v, want it to name the prefix as invalid", tt.prefix, err)
		}
	}
}

func TestCheckOpTimeout(t *testing.T) {
	for _, tt := range []struct {
		d  time.Duration
		ok bool
	}{{time.Nanosecond, true}, {pgutil.DefaultOpTimeout, true}, {0, false}, {-time.Second, false}} {
		if err := pgutil.CheckOpTimeout(tt.d); (err == nil) != tt.ok {
			t.Errorf("CheckOpTimeout(%v) = %v, want ok %v", tt.d, err, tt.ok)
		}
	}
}

// TestLockKeyIsStable pins the keys of released stores: a replica of an old
// release and one of a new release must take the same advisory lock, or
// they would migrate at once.
func TestLockKeyIsStable(t *testing.T) {
	for name, want := range map[string]int64{
		"aid/retrieval/pgvector": -634608550834173295,
		"aid/pgstore:aid_agent":  -3416161270994231862,
	} {
		if got := pgutil.LockKey(name); got != want {
			t.Errorf("LockKey(%q) = %d, want %d", name, got, want)
		}
	}
}
