// Package pgtest is the one way aid's tests reach a real PostgreSQL server with pgvector.
//
// The server is named by the environment variable AID_TEST_DATABASE_URL, which
// scripts/postgres.sh prints and scripts/test.sh sets for the whole test run:
//
//	eval "$(scripts/postgres.sh env)"   # install (as root) and start a throwaway server
//	go test ./...
//	scripts/postgres.sh stop
//
// A test that needs the server and finds the variable unset fails when CI is set
// (so a CI run can never pass by skipping its database tests) and is skipped otherwise,
// with a message that says how to start one.
//
// Each test that writes should take its own database from [NewDatabase] or [NewPool]:
// go test runs packages in parallel against the same server, and a database per test
// keeps them from seeing each other's tables.
//
// pgtest is for tests only. It is not a connection helper for production code, which
// configures its own pool from its own DSN.
package pgtest
