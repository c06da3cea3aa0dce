// Package agentstoretest is the contract every agents.Store and
// agents.MemoryStore must pass, written once and run against each
// implementation (the in-memory ones in package agents, the PostgreSQL ones
// in package pgstore), so that they cannot drift apart.
//
// It is for tests only: it imports package testing.
package agentstoretest
