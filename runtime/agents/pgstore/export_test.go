package pgstore

// NoRetry makes s give up at the first deadlock or serialization failure,
// so that a test can tell the first attempt from the safety net.
func NoRetry(s *Store) { s.noRetry = true }
