package pgledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
)

// TestAbortedTransactionIsRetriedOnce makes the database itself abort the
// ledger's transactions: a trigger on the accounts table raises the given
// SQLSTATE on the first `times` updates, counted by a sequence, which a
// rollback does not undo. A deadlock or serialization failure is run again
// once, from scratch and counted once; a second one, or any other error,
// reaches the caller.
func TestAbortedTransactionIsRetriedOnce(t *testing.T) {
	acct := gateway.Account{Budget: "nightly", Scope: gateway.ScopeRun, Key: "r1"}
	amount := gateway.Amount{NanoUSD: 1000, Tokens: 10}
	actual := gateway.Amount{NanoUSD: 400, Tokens: 4}
	reservation := gateway.Reservation{ID: "h1", Alias: "small", Model: "m-1", Amount: amount,
		Limits: []gateway.Limit{{Account: acct, Max: gateway.Amount{NanoUSD: 1e9}}}}
	tests := []struct {
		op        string // the operation the trigger aborts
		code      string
		times     int
		wantErr   bool
		wantFired int64
		want      gateway.AccountSpend // the account afterwards
	}{
		{op: "reserve", code: "40P01", times: 1, wantFired: 2, want: gateway.AccountSpend{Reserved: amount}},
		{op: "reserve", code: "40001", times: 1, wantFired: 2, want: gateway.AccountSpend{Reserved: amount}},
		{op: "reserve", code: "40P01", times: 2, wantErr: true, wantFired: 2},
		{op: "reserve", code: "23514", times: 1, wantErr: true, wantFired: 1},
		{op: "settle", code: "40P01", times: 1, wantFired: 2, want: gateway.AccountSpend{Spent: actual, Calls: 1}},
		{op: "settle", code: "40001", times: 2, wantErr: true, wantFired: 2, want: gateway.AccountSpend{Reserved: amount}},
		{op: "release", code: "40001", times: 1, wantFired: 2},
		{op: "release", code: "40P01", times: 2, wantErr: true, wantFired: 2, want: gateway.AccountSpend{Reserved: amount}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s %d", tt.op, tt.code, tt.times), func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			l, err := pgledger.Open(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.Close)
			conn, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close(context.Background()) })
			ctx := t.Context()
			if tt.op != "reserve" {
				if err := l.Reserve(ctx, reservation); err != nil {
					t.Fatal(err)
				}
			}
			fired := pgtest.AbortWrites(t, conn, "aid_budget_accounts", "UPDATE", tt.code, tt.times)
			switch tt.op {
			case "reserve":
				err = l.Reserve(ctx, reservation)
			case "settle":
				err = l.Settle(ctx, reservation.ID, actual)
			case "release":
				err = l.Release(ctx, reservation.ID)
			}
			var pe *pgconn.PgError
			switch {
			case tt.wantErr && (!errors.As(err, &pe) || pe.Code != tt.code):
				t.Errorf("%s: %v, want the database's %s", tt.op, err, tt.code)
			case !tt.wantErr && err != nil:
				t.Errorf("%s: %v", tt.op, err)
			}
			if n := fired(); n != tt.wantFired {
				t.Errorf("the transaction ran %d times, want %d", n, tt.wantFired)
			}
			s, err := l.Summary(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := gateway.AccountSpend{Account: acct}
			for _, a := range s.ByAccount {
				if a.Account == acct {
					got = a
				}
			}
			tt.want.Account = acct
			if got != tt.want {
				t.Errorf("account %+v, want %+v", got, tt.want)
			}
		})
	}
}
