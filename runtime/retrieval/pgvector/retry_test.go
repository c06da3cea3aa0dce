package pgvector_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// TestAbortedTransactionIsRetriedOnce makes the database itself abort the
// store's writes: a statement trigger on the table raises the given
// SQLSTATE on the first `times` INSERT or DELETE statements, counted by a
// sequence, which a rollback does not undo. A deadlock or serialization
// failure is run again once, from scratch (the COPY path too: its
// temporary table is made again); a second one, or any other error,
// reaches the caller and leaves the table as it was.
func TestAbortedTransactionIsRetriedOnce(t *testing.T) {
	tests := []struct {
		op      string // "small" and "large" upserts (unnest and COPY), "delete"
		code    string
		times   int
		wantErr bool
		noRetry bool // the store gives up at the first abort
	}{
		{"small", "40P01", 1, false, false},
		{"small", "40001", 1, false, false},
		{"small", "40001", 2, true, false},
		{"small", "40P01", 1, true, true},
		{"small", "23514", 1, true, false},
		{"large", "40P01", 1, false, false},
		{"large", "40001", 1, true, true},
		{"large", "40P01", 2, true, false},
		{"delete", "40001", 1, false, false},
		{"delete", "40P01", 2, true, false},
	}
	pool := pgtest.NewPool(t)
	rng := rand.New(rand.NewPCG(1, 1))
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%s %s %d noRetry=%v", tt.op, tt.code, tt.times, tt.noRetry), func(t *testing.T) {
			table := fmt.Sprintf("retry_%d", i)
			s := newStore(t, pool, pgvector.Config{Table: table, Dimensions: 3})
			if tt.noRetry {
				pgvector.DisableRetry(s)
			}
			if err := s.Upsert(t.Context(), []retrieval.Record{record("old", []float32{1, 0, 0}, nil)}); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(t.Context(), fmt.Sprintf(`
				CREATE SEQUENCE %[1]s_fired;
				CREATE FUNCTION %[1]s_abort() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF nextval('%[1]s_fired') <= %[2]d THEN
						RAISE EXCEPTION 'aborted by the test' USING ERRCODE = '%[3]s';
					END IF;
					RETURN NULL;
				END $$;
				CREATE TRIGGER abort BEFORE INSERT OR DELETE ON %[1]s FOR EACH STATEMENT EXECUTE FUNCTION %[1]s_abort();`,
				table, tt.times, tt.code)); err != nil {
				t.Fatal(err)
			}
			var err error
			want := []string{"old"}
			switch tt.op {
			case "delete":
				err = s.Delete(t.Context(), []string{"old"})
				if !tt.wantErr {
					want = nil
				}
			default:
				n := 3
				if tt.op == "large" {
					n = 500
				}
				recs := make([]retrieval.Record, n)
				for j := range recs {
					recs[j] = record(fmt.Sprintf("n%03d", j), randomVec(rng, 3), nil)
					if !tt.wantErr {
						want = append(want, recs[j].ID)
					}
				}
				err = s.Upsert(t.Context(), recs)
			}
			var pe *pgconn.PgError
			switch {
			case tt.wantErr && (!errors.As(err, &pe) || pe.Code != tt.code):
				t.Errorf("%s: %v, want the database's %s", tt.op, err, tt.code)
			case !tt.wantErr && err != nil:
				t.Errorf("%s: %v", tt.op, err)
			}
			got, err := s.IDs(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("table holds %d ids, want %d", len(got), len(want))
			}
			var fired int64
			if err := pool.QueryRow(t.Context(), fmt.Sprintf(`SELECT last_value FROM %s_fired`, table)).Scan(&fired); err != nil {
				t.Fatal(err)
			}
			wantFired := int64(2)
			if tt.code == "23514" || tt.noRetry {
				wantFired = 1
			}
			if fired != wantFired {
				t.Errorf("the trigger fired %d times, want %d", fired, wantFired)
			}
		})
	}
}
