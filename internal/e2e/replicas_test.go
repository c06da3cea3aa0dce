package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/internal/servicetest"
)

// tightUSD is budgets.tight.maxUSD in testdata/e2e/replicas.cue.
const tightUSD = 0.5

// replicas is examples/support-desk with its state in PostgreSQL and a
// counter agent on a small global budget.
func replicas() variant {
	return variant{name: "replicas", overlay: "replicas.cue", extra: []string{"e2e-script.json"}, replace: map[string]string{"@HOLD@": hold.URL, "@SLOW@": slow.URL}}
}

// TestReplicasSharePostgres runs two processes of one generated service on
// one database: a run paused on the first is resumed on the second, and
// concurrent requests to both never jointly spend more than the global
// budget, the rest being refused with 402 budget_exceeded.
func TestReplicasSharePostgres(t *testing.T) {
	dsn := pgtest.NewDatabase(t) // skips without AID_TEST_DATABASE_URL, fails under CI
	bin, dir := build(t, replicas())
	env := "AID_E2E_DSN=" + dsn
	// One after the other, so that the second finds the first's tables.
	a := start(t, bin, dir, env)
	b := start(t, bin, dir, env)

	t.Run("pause on one replica, resume on the other", func(t *testing.T) {
		status, hdr, body := a.do(t, "POST", "/v1/chat/completions", "", strings.NewReader(`{"user":"customer-1","messages":[{"role":"user","content":"I want a refund for order AB-123456"}]}`))
		if status != http.StatusOK || !strings.Contains(string(body), `"finish_reason":"stop"`) || !strings.Contains(string(body), `"pending":{`) {
			t.Fatalf("replica A: status %d %s", status, body)
		}
		runID := hdr.Get("X-Aid-Run-Id")
		var rec runRecord
		b.doJSON(t, "GET", "/v1/runs/"+runID, "", "", http.StatusOK, &rec)
		if rec.Status != "paused" || rec.Pending == nil || rec.Pending.Tool != "issue_refund" {
			t.Fatalf("replica B sees status %q pending %+v", rec.Status, rec.Pending)
		}
		var done runRecord
		b.doJSON(t, "POST", "/v1/runs/"+runID+"/resume", "", `{"action":"approve"}`, http.StatusOK, &done)
		if done.Status != "completed" || !strings.Contains(done.Answer, "59.90") {
			t.Fatalf("resumed on B: status %q answer %q", done.Status, done.Answer)
		}
		// A sees B's decision, and refuses a second one.
		a.doJSON(t, "GET", "/v1/runs/"+runID, "", "", http.StatusOK, &rec)
		if rec.Status != "completed" {
			t.Errorf("replica A sees status %q after B resumed", rec.Status)
		}
		status, _, body = a.do(t, "POST", "/v1/runs/"+runID+"/resume", "", strings.NewReader(`{"action":"approve"}`))
		if status != http.StatusConflict || errorCode(t, body) != "run_not_paused" {
			t.Errorf("second resume on A: status %d %s", status, body)
		}
	})

	t.Run("one global budget across replicas", func(t *testing.T) {
		const n = 32
		type result struct {
			status int
			code   string
			runID  string
			err    string
		}
		results := make([]result, n)
		var wg sync.WaitGroup
		for i := range n {
			p := a
			if i%2 == 1 {
				p = b
			}
			wg.Go(func() {
				req, err := http.NewRequest("POST", p.base+"/v1/chat/completions", strings.NewReader(`{"model":"counter","messages":[{"role":"user","content":"count me"}]}`))
				if err != nil {
					results[i].err = err.Error()
					return
				}
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					results[i].err = err.Error()
					return
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				if err != nil {
					results[i].err = err.Error()
					return
				}
				results[i] = result{status: resp.StatusCode, runID: resp.Header.Get("X-Aid-Run-Id")}
				if resp.StatusCode != http.StatusOK {
					var e servicetest.ErrorBody
					if err := json.Unmarshal(body, &e); err != nil {
						results[i].err = fmt.Sprintf("status %d, not an error body: %s", resp.StatusCode, body)
					}
					results[i].code = e.Error.Code
				}
			})
		}
		wg.Wait()
		ok, refused := 0, 0
		var runCost float64
		for i, r := range results {
			switch {
			case r.err != "":
				t.Errorf("request %d: %s", i, r.err)
			case r.status == http.StatusOK:
				ok++
				var rec runRecord
				a.doJSON(t, "GET", "/v1/runs/"+r.runID, "", "", http.StatusOK, &rec)
				runCost += rec.CostUSD
			case r.status == http.StatusPaymentRequired && r.code == "budget_exceeded":
				refused++
			default:
				t.Errorf("request %d: status %d code %q", i, r.status, r.code)
			}
		}
		if ok == 0 || refused == 0 {
			t.Fatalf("%d answered and %d refused, want both (the budget fits a few calls)", ok, refused)
		}
		spentA, okA := metric(t, a, "", `aid_budget_spent_usd{budget="tight",scope="global"}`)
		spentB, okB := metric(t, b, "", `aid_budget_spent_usd{budget="tight",scope="global"}`)
		if !okA || !okB {
			t.Fatal("no aid_budget_spent_usd for the tight budget on a replica")
		}
		t.Logf("%d answered, %d refused; spent %v of %v USD", ok, refused, spentA, tightUSD)
		if spentA != spentB {
			t.Errorf("replicas read different spend: A %v, B %v", spentA, spentB)
		}
		if spentA > tightUSD {
			t.Errorf("spent %v USD, over the %v budget", spentA, tightUSD)
		}
		// Every charged call belongs to an answered run: the refused ones
		// were stopped before their call.
		if math.Abs(spentA-runCost) > 1e-9 {
			t.Errorf("ledger %v USD, answered runs cost %v", spentA, runCost)
		}
	})

	t.Run("cancel on one replica stops a run on the other", func(t *testing.T) {
		type answer struct {
			status int
			hdr    http.Header
			body   []byte
		}
		done := make(chan answer, 1)
		before := hold.count()
		go func() {
			status, hdr, body := a.do(t, "POST", "/v1/agents/holder/runs", "", strings.NewReader(`{"input":"hold AB-123456"}`))
			done <- answer{status, hdr, body}
		}()
		deadline := time.Now().Add(30 * time.Second)
		for hold.count() == before {
			if time.Now().After(deadline) {
				t.Fatal("the hold tool was never called")
			}
			time.Sleep(5 * time.Millisecond)
		}
		runID := runningRun(t, dsn, "holder")
		start := time.Now()
		var rec struct {
			Status      string `json:"status"`
			CancelledBy *struct {
				By string `json:"by"`
			} `json:"cancelled_by"`
			Steps []struct {
				ToolCalls []struct {
					Interrupted bool `json:"interrupted"`
					Done        bool `json:"done"`
				} `json:"tool_calls"`
			} `json:"steps"`
		}
		b.doJSON(t, "POST", "/v1/runs/"+runID+"/cancel", "", `{"by":"replica-b-operator"}`, http.StatusOK, &rec)
		t.Logf("cancel on B to cancelled: %v", time.Since(start))
		if rec.Status != "cancelled" || rec.CancelledBy == nil || rec.CancelledBy.By != "replica-b-operator" ||
			len(rec.Steps) != 1 || !rec.Steps[0].ToolCalls[0].Interrupted || rec.Steps[0].ToolCalls[0].Done {
			t.Fatalf("cancelled run %+v", rec)
		}
		got := <-done
		if got.status != http.StatusConflict || errorCode(t, got.body) != "run_cancelled" || got.hdr.Get("X-Aid-Run-Id") != runID {
			t.Fatalf("replica A answered the run's request %d %s", got.status, got.body)
		}
	})

	t.Run("an MCP approval outlives the replica that asked", func(t *testing.T) {
		// Two more replicas behind a round-robin proxy: the one that
		// starts the run is killed (SIGKILL) while the person decides; the
		// client's retry with the decision goes to the other.
		backends := []*proc{start(t, bin, dir, env), start(t, bin, dir, env)}
		var mu sync.Mutex
		next, lastCall := 0, -1
		dead := map[int]bool{}
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			mu.Lock()
			i := next % len(backends)
			for dead[i] {
				next++
				i = next % len(backends)
			}
			next++
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				lastCall = i
			}
			mu.Unlock()
			u, _ := url.Parse(backends[i].base)
			httputil.NewSingleHostReverseProxy(u).ServeHTTP(w, r)
		}))
		defer proxy.Close()
		var asked []string
		killed := -1
		client := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, &sdk.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				asked = append(asked, req.Params.Message)
				mu.Lock()
				i := lastCall
				dead[i] = true
				mu.Unlock()
				if err := backends[i].cmd.Process.Kill(); err != nil {
					return nil, err
				}
				<-backends[i].done
				killed = i
				return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
			},
		})
		sess, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: proxy.URL + "/mcp"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		if v := sess.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Fatalf("protocol %q; want 2026-07-28", v)
		}
		res, err := sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "triage", Arguments: map[string]any{"message": "I want a refund for order AB-123456", "user_id": "customer-1"}})
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		decidedOn := lastCall
		mu.Unlock()
		if len(asked) != 1 || !strings.Contains(asked[0], "issue_refund") || killed < 0 || decidedOn == killed {
			t.Fatalf("asked %q; killed replica %d, decided on %d", asked, killed, decidedOn)
		}
		text := ""
		if len(res.Content) > 0 {
			text = res.Content[0].(*sdk.TextContent).Text
		}
		if res.IsError || res.Meta["aid/status"] != "completed" || !strings.Contains(text, "59.90") {
			t.Fatalf("after the approval on B: %+v %q", res.Meta, text)
		}
		var rec runRecord
		b.doJSON(t, "GET", "/v1/runs/"+res.Meta["aid/run_id"].(string), "", "", http.StatusOK, &rec)
		if rec.Status != "completed" {
			t.Errorf("B reads the run %q", rec.Status)
		}
	})

	a.stop(t)
	b.stop(t)
}

// runningRun returns the id of the one running run of agent in the
// database, waiting for it to appear.
func runningRun(t *testing.T, dsn, agent string) string {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := pool.QueryRow(t.Context(), `SELECT run_id FROM aid_agent_runs WHERE agent = $1 AND status = 'running'`, agent).Scan(&id)
		if err == nil {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running run of %s: %v", agent, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holdServer holds every request until its client goes away.
type holdServer struct {
	*httptest.Server
	mu sync.Mutex
	n  int
}

func newHoldServer() *holdServer {
	h := &holdServer{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read first: the server sees a closed connection only once it
		// has read the request.
		_, _ = io.Copy(io.Discard, r.Body)
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}))
	return h
}

func (h *holdServer) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}
