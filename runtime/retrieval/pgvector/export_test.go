package pgvector

// ExactRuns returns how many searches ran again exactly.
func ExactRuns(s *Store) int64 { return s.exactRuns.Load() }

// SetIterativeScan sets hnsw.iterative_scan for the store's searches.
func SetIterativeScan(s *Store, mode string) { s.iterative = mode }

// DisableExact makes the store never run a search again exactly.
func DisableExact(s *Store) { s.noExact = true }

// DisableRetry makes the store give up at the first aborted transaction.
func DisableRetry(s *Store) { s.noRetry = true }

// NaNLast is nanLast.
var NaNLast = nanLast
