package pgutil

import (
	"fmt"
	"regexp"
	"time"
)

// DefaultOpTimeout bounds each store operation unless the store is told
// otherwise. The runtime records spend, tool results and run ends with
// contexts that ignore the caller's cancellation, so that work done is
// never lost because a client went away; this bound keeps a hung database
// from holding such a write forever.
const DefaultOpTimeout = 10 * time.Second

var validPrefix = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,40}$`)

// CheckTablePrefix refuses a table prefix that is not 1 to 41 lower-case
// letters, digits and underscores, starting with a letter or underscore: such
// a prefix needs no quoting in an operator's SQL, and with a suffix such as
// "_reservations" still fits PostgreSQL's 63-byte names.
func CheckTablePrefix(prefix string) error {
	if !validPrefix.MatchString(prefix) {
		return fmt.Errorf("invalid table prefix %q (want lower-case letters, digits and underscores)", prefix)
	}
	return nil
}

// CheckOpTimeout refuses an operation timeout that is not positive.
func CheckOpTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("operation timeout %v is not positive", d)
	}
	return nil
}
