package pgstore_test

import (
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/agentstoretest"
	"github.com/aidgen/aid/runtime/agents/pgstore"
)

// newStore returns a store on a fresh database.
func newStore(t *testing.T, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(t.Context(), pgtest.NewPool(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreContract(t *testing.T) {
	agentstoretest.Run(t, func(t *testing.T) agents.Store { return newStore(t) })
}

func TestStoreReplicasContract(t *testing.T) {
	agentstoretest.RunReplicas(t, func(t *testing.T) (agents.Store, agents.Store) {
		dsn := pgtest.NewDatabase(t)
		var stores [2]agents.Store
		for i := range stores {
			s, err := pgstore.New(t.Context(), openPool(t, dsn))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			stores[i] = s
		}
		return stores[0], stores[1]
	})
}

func TestMemoryContract(t *testing.T) {
	agentstoretest.RunMemory(t, func(t *testing.T) agents.MemoryStore {
		m, err := newStore(t).Memory("notes")
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}
