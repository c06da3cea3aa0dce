package pgledger

// NoRetry makes l give up at the first deadlock or serialization failure,
// so that a test can tell the lock order from the safety net.
func NoRetry(l *Ledger) { l.noRetry = true }
