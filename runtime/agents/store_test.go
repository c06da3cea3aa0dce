package agents_test

import (
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/agentstoretest"
)

func TestInMemoryStoreContract(t *testing.T) {
	agentstoretest.Run(t, func(*testing.T) agents.Store { return agents.NewInMemoryStore() })
}

func TestInMemoryMemoryContract(t *testing.T) {
	agentstoretest.RunMemory(t, func(*testing.T) agents.MemoryStore { return agents.NewInMemoryMemory() })
}

func TestInMemoryStoreReplicasContract(t *testing.T) {
	agentstoretest.RunReplicas(t, func(*testing.T) (agents.Store, agents.Store) {
		s := agents.NewInMemoryStore()
		return s, s
	})
}
