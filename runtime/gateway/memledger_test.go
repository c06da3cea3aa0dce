package gateway_test

import (
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/ledgertest"
)

func TestMemoryLedgerContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) gateway.Ledger { return gateway.NewMemoryLedger() })
}
