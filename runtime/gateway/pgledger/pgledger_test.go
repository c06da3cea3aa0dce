package pgledger_test

import (
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/ledgertest"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
)

func TestContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) gateway.Ledger {
		dsn := pgtest.NewDatabase(t)
		l, err := pgledger.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	})
	// Replicas: a ledger and a pool each, over one database.
	ledgertest.RunShared(t, func(t *testing.T, n int) []gateway.Ledger {
		dsn := pgtest.NewDatabase(t)
		ls := make([]gateway.Ledger, n)
		for i := range ls {
			l, err := pgledger.Open(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Close)
			ls[i] = l
		}
		return ls
	})
}
