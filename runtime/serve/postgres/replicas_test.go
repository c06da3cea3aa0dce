package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
	"github.com/aidgen/aid/runtime/serve"
	"github.com/aidgen/aid/runtime/serve/postgres"
	"github.com/aidgen/aid/runtime/service"
)

// The limits tests' replicas are what serve.Run builds, in process: each
// assembles the application on its own pools (app.Assemble with
// postgres.OpenState) and serves it over HTTP (service.New), all on one
// database. What serve.Run adds (flags, logs, the process) is not what is
// measured, and building them here lets the test inject the gateway's
// clock (app.Options.Clock), so that three minutes of a rate limit pass in
// seconds.

// frontendSecret is the secret of the key "frontend" (caller, tenant acme)
// the limits tests send.
const frontendSecret = "sk-front-limits"

// limitsApp is an application with one agent answering in one model call,
// as the tenant's key "frontend" calls it: budgets and rateLimits are the
// test's.
func limitsApp(t *testing.T, budgets []gateway.Budget, limits []gateway.RateLimit) app.Description {
	return app.Description{
		Name: "limits", Version: "0.1.0", Dir: t.TempDir(),
		Providers: []app.Provider{{Name: "fake", Kind: fake.Kind{Seed: 1}}},
		Models: []gateway.PinnedModel{{Alias: "m", Spec: gateway.ModelSpec{ID: "fake-1", Provider: "fake", Kind: gateway.KindChat,
			ContextWindow: 8192, MaxOutputTokens: 64, Cost: gateway.CostProfile{InputPer1kUSD: 0.4, OutputPer1kUSD: 0.4}}}},
		Agents:     []agents.Agent{{Name: "desk", Model: "m", Instructions: "Answer in one sentence.", MaxSteps: 2}},
		Budgets:    budgets,
		RateLimits: limits,
		Service: app.Service{Entry: "desk", Auth: app.Auth{Kind: "none", Keys: []app.Key{
			{Name: "frontend", Roles: []string{"caller"}, Tenant: "acme", SecretEnv: "KEY_FRONTEND"},
		}}, State: app.State{Kind: app.StatePostgres, DSNEnv: "LIMITS_DSN"}},
	}
}

// startReplicas starts n replicas of desc on the database dsn, each on its
// own pools, reading the time from clock (nil: the wall clock), with
// wrap around their providers (nil: none), and returns their base URLs.
func startReplicas(t *testing.T, desc app.Description, dsn string, n int, clock func() time.Time, wrap func(gateway.Provider) gateway.Provider) []string {
	t.Helper()
	env := map[string]string{"LIMITS_DSN": dsn, "KEY_FRONTEND": frontendSecret}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	urls := make([]string, n)
	for i := range n {
		// One after the other, so that the later ones find the tables.
		a, err := app.Assemble(t.Context(), desc, app.Options{OpenState: postgres.OpenState, LookupEnv: lookup, Clock: clock, WrapProvider: wrap})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := a.Close(); err != nil {
				t.Error(err)
			}
		})
		auth, disabled, err := serve.Auth(desc.Service.Auth, lookup)
		if err != nil || len(disabled) > 0 {
			t.Fatalf("keys: %v %v", disabled, err)
		}
		svc, err := service.New(service.Config{Agents: a.Agents, Gateway: a.Gateway, Auth: auth, Entry: desc.Service.Entry})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(svc)
		t.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	return urls
}

// answer is one response to a chat completion, as the limits tests judge
// it.
type answer struct {
	status  int
	code    string
	message string
	header  http.Header
}

// complete sends one chat completion as frontend and reads its answer.
func complete(ctx context.Context, client *http.Client, base string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"How much is this going to cost me?"}]}`))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+frontendSecret)
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		return answer{}, fmt.Errorf("status %d: decode: %w", res.StatusCode, err)
	}
	a := answer{status: res.StatusCode, header: res.Header}
	if body.Error != nil {
		a.code, a.message = body.Error.Code, body.Error.Message
	}
	return a, nil
}

// limitsClient is an HTTP client that opens as many connections as the
// test sends requests at once.
func limitsClient(t *testing.T) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1000
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Minute}
}

// TestTenantBudgetAcrossReplicas is the figure through the
// service: three HTTP replicas on one PostgreSQL database take 2,000
// concurrent chat completions (300 with -short) of one tenant's key
// against that tenant's budget of $1 per Berlin day. The spend settled on
// the budget is at most $1 to the nanodollar, no reservation is left
// held, and every request is answered 200 or 402 budget_exceeded naming
// the budget.
func TestTenantBudgetAcrossReplicas(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	budget := gateway.Budget{Name: "acme_daily", MaxUSD: 1, Scope: gateway.ScopeTenant, Window: "day", TimeZone: "Europe/Berlin", AppliesToAll: true}
	urls := startReplicas(t, limitsApp(t, []gateway.Budget{budget}, nil), dsn, 3, nil, nil)
	calls := 2000
	if testing.Short() {
		calls = 300
	}
	client := limitsClient(t)
	var ok, refused, overloaded atomic.Int64
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-start
			a, err := complete(t.Context(), client, urls[i%len(urls)])
			switch {
			case err != nil:
				errs <- err
			case a.status == http.StatusOK:
				ok.Add(1)
			case a.status == http.StatusPaymentRequired && a.code == "budget_exceeded" && strings.Contains(a.message, `"acme_daily"`):
				refused.Add(1)
			case a.status == http.StatusServiceUnavailable && a.code == "dependency_unavailable":
				// The ledger's operation outlived its timeout waiting
				// for a connection (a loaded machine under -race): the
				// call was refused before it was sent, never overspent,
				// and the spend checks below still hold. Counted and
				// logged; the README's figure has none.
				overloaded.Add(1)
			default:
				errs <- fmt.Errorf("answer %d %s: %s", a.status, a.code, a.message)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ledger, err := pgledger.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer ledger.Close()
	sum, err := ledger.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var spent gateway.Amount
	var settled int64
	for _, a := range sum.ByAccount {
		if a.Account.Budget != "acme_daily" {
			continue
		}
		if a.Account.Scope != gateway.ScopeTenant || !strings.HasPrefix(a.Account.Key, "acme@") {
			t.Errorf("charged to account %+v, want the tenant acme's day", a.Account)
		}
		spent = spent.Add(a.Spent)
		settled += a.Calls
		if a.Reserved != (gateway.Amount{}) {
			t.Errorf("reservations left held: %+v", a.Reserved)
		}
	}
	t.Logf("%d chat completions on %d replicas: %d answered, %d refused 402 naming acme_daily, %d refused 503 with the ledger overloaded; settled %d calls, %d of 1000000000 nanodollars",
		calls, len(urls), ok.Load(), refused.Load(), overloaded.Load(), settled, spent.NanoUSD)
	if spent.NanoUSD > 1e9 {
		t.Errorf("settled %d nanodollars, over the $1 budget", spent.NanoUSD)
	}
	if settled != ok.Load() {
		t.Errorf("%d calls settled for %d answered requests", settled, ok.Load())
	}
	if ok.Load() == 0 || refused.Load() == 0 {
		t.Errorf("%d answered, %d refused: the budget should admit some requests and refuse the rest", ok.Load(), refused.Load())
	}
}

// stepClock is a clock the test moves.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// sentRequests records what reached the providers, with the clock's time.
type sentRequests struct {
	mu    sync.Mutex
	clock *stepClock
	sent  []sentRequest
}

type sentRequest struct {
	at  time.Time
	req gateway.Request
}

func (s *sentRequests) wrap(p gateway.Provider) gateway.Provider { return recordingProvider{p, s} }

type recordingProvider struct {
	gateway.Provider
	s *sentRequests
}

func (r recordingProvider) Generate(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.Response, error) {
	r.s.mu.Lock()
	r.s.sent = append(r.s.sent, sentRequest{r.s.clock.Now(), req})
	r.s.mu.Unlock()
	return r.Provider.Generate(ctx, model, req)
}

// TestRateLimitAcrossReplicas is the rate limit figure through
// the service: three HTTP replicas on one database share a limit of
// 10,000 tokens per minute per key. Requests of one key arrive in bursts
// of 12 every 5 seconds of an injected clock, for three minutes; the
// tokens admitted in any 60 seconds (each call counting its worst case,
// what reached the provider priced by the gateway's estimate) never pass
// 10,000, and every refusal is a 429 rate_limit_exceeded with Retry-After
// and OpenAI's x-ratelimit-* headers.
func TestRateLimitAcrossReplicas(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	const tpm = 10_000
	clock := &stepClock{now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	sent := &sentRequests{clock: clock}
	desc := limitsApp(t, nil, []gateway.RateLimit{{Name: "per_key_tpm", Scope: gateway.RateScopeKey, TokensPerMinute: tpm}})
	urls := startReplicas(t, desc, dsn, 3, clock.Now, sent.wrap)
	// A gateway of the same application prices what reached the provider
	// as the replicas reserved it.
	fp, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	pricer, err := gateway.New(gateway.Config{Models: desc.Models, Providers: map[string]gateway.Provider{"fake": fp}})
	if err != nil {
		t.Fatal(err)
	}
	client := limitsClient(t)
	const step, steps, burst = 5 * time.Second, 36, 12
	begin := clock.Now()
	var refused atomic.Int64
	for s := range steps {
		clock.Set(begin.Add(time.Duration(s) * step))
		errs := make(chan error, burst)
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				a, err := complete(t.Context(), client, urls[i%len(urls)])
				switch {
				case err != nil:
					errs <- err
				case a.status == http.StatusOK:
				case a.status == http.StatusTooManyRequests && a.code == "rate_limit_exceeded" && strings.Contains(a.message, "per_key_tpm"):
					refused.Add(1)
					retry, err := strconv.Atoi(a.header.Get("Retry-After"))
					if err != nil || retry <= 0 || a.header.Get("x-ratelimit-limit-tokens") != strconv.Itoa(tpm) || a.header.Get("x-ratelimit-reset-tokens") == "" {
						errs <- fmt.Errorf("a 429's headers: %v", a.header)
					}
				default:
					errs <- fmt.Errorf("answer %d %s: %s", a.status, a.code, a.message)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	admitted := make([]int64, steps)
	var total, worst int64
	sent.mu.Lock()
	for _, r := range sent.sent {
		u, err := pricer.EstimateUsage("m", r.req)
		if err != nil {
			t.Fatal(err)
		}
		admitted[int(r.at.Sub(begin)/step)] += u.TotalTokens
		total += u.TotalTokens
	}
	calls := len(sent.sent)
	sent.mu.Unlock()
	for s := range steps {
		var sum int64
		for j := s; j < steps && time.Duration(j-s)*step < time.Minute; j++ {
			sum += admitted[j]
		}
		worst = max(worst, sum)
	}
	t.Logf("%d requests over %s on %d replicas: %d admitted (%d tokens), %d refused 429; at most %d tokens in any 60 s (limit %d)",
		steps*burst, time.Duration(steps)*step, len(urls), calls, total, refused.Load(), worst, tpm)
	if worst > tpm {
		t.Errorf("%d tokens admitted within 60 s, over the %d per minute", worst, tpm)
	}
	if total <= 2*tpm || refused.Load() == 0 {
		t.Errorf("%d tokens admitted in three minutes, %d refused: the window should slide and refuse the excess", total, refused.Load())
	}
}
