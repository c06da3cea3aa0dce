// Package ledgertest is the contract every gateway.Ledger must pass, written
// once and run against each implementation (the memory ledger and the
// PostgreSQL one), so that they cannot drift apart.
//
// It is for tests only: it imports package testing.
package ledgertest
