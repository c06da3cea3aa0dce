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
}
