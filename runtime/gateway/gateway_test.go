package gateway_test

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

var chatCaps = []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON, gateway.CapabilityStreaming}

// catalog is the test catalog: two chat models that can do everything, one
// that declares nothing, and an embedding model.
func catalog() []gateway.PinnedModel {
	return []gateway.PinnedModel{
		{Alias: "large", Spec: gateway.ModelSpec{ID: "fake-large-2024-08-06", Provider: "fake", ContextWindow: 128000, MaxOutputTokens: 100,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.0025, OutputPer1kUSD: 0.01}, Capabilities: chatCaps}},
		{Alias: "small", Spec: gateway.ModelSpec{ID: "fake-small-2024-07-18", Provider: "fake", MaxOutputTokens: 50,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.00015, OutputPer1kUSD: 0.0006}, Capabilities: chatCaps}},
		{Alias: "plain", Spec: gateway.ModelSpec{ID: "fake-plain-1", Provider: "fake", MaxOutputTokens: 50}},
		{Alias: "embed", Spec: gateway.ModelSpec{ID: "fake-embed-3", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 8,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.00002}}},
	}
}

var budgets = []gateway.Budget{
	{Name: "nightly", MaxUSD: 0.01, Scope: gateway.ScopeRun},
	{Name: "chat", MaxTotalTokens: 1000, Scope: gateway.ScopeThread},
	{Name: "org", MaxUSD: 1, Scope: gateway.ScopeGlobal},
}

// fastRetry keeps the tests quick: two tries, a millisecond apart.
var fastRetry = gateway.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond, MaxRetryAfter: 50 * time.Millisecond}

func newGateway(t testing.TB, fc fake.Config, edit ...func(*gateway.Config)) (*gateway.Gateway, *fake.Provider) {
	t.Helper()
	p, err := fake.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.Config{
		Models:    catalog(),
		Providers: map[string]gateway.Provider{"fake": p},
		Budgets:   budgets,
		Retry:     fastRetry,
	}
	for _, e := range edit {
		e(&cfg)
	}
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g, p
}

func user(text string) gateway.Request {
	return gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: text}}}
}

func serverError(code int) error {
	return &gateway.ProviderError{Provider: "fake", StatusCode: code, Retryable: code == 429 || code >= 500, Err: errors.New("scripted")}
}

func TestNewRejectsBadConfig(t *testing.T) {
	chat := gateway.ModelSpec{ID: "m-1", Provider: "fake", MaxOutputTokens: 10}
	tests := []struct {
		name string
		edit func(*gateway.Config)
		want string
	}{
		{"duplicate alias", func(c *gateway.Config) {
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "large", Spec: chat})
		}, `alias "large" is pinned twice`},
		{"empty alias", func(c *gateway.Config) {
			c.Models = append(c.Models, gateway.PinnedModel{Spec: chat})
		}, "empty alias"},
		{"unknown provider", func(c *gateway.Config) {
			s := chat
			s.Provider = "openai"
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: s})
		}, `names provider "openai", which is not configured`},
		{"deployment declared twice", func(c *gateway.Config) {
			// The second is named after its provider, as the first is.
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: chat, Deployments: []gateway.Deployment{{Provider: "fake"}, {Name: "fake", Provider: "fake"}}})
		}, `alias "x": deployment "fake" is declared twice`},
		{"chat model without output bound", func(c *gateway.Config) {
			s := chat
			s.MaxOutputTokens = 0
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: s})
		}, "must declare max output tokens"},
		{"embedding model without width", func(c *gateway.Config) {
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: gateway.ModelSpec{ID: "e", Provider: "fake", Kind: gateway.KindEmbedding}})
		}, "must declare its dimensions"},
		{"negative price", func(c *gateway.Config) {
			s := chat
			s.Cost.InputPer1kUSD = -1
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: s})
		}, "invalid price of -1 US dollars"},
		{"NaN output price", func(c *gateway.Config) {
			s := chat
			s.Cost.OutputPer1kUSD = math.NaN()
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: s})
		}, "invalid price of NaN US dollars"},
		{"infinite input price", func(c *gateway.Config) {
			s := chat
			s.Cost.InputPer1kUSD = math.Inf(1)
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: s})
		}, "invalid price of +Inf US dollars"},
		{"cached input dearer than input", func(c *gateway.Config) {
			s := chat
			s.Cost.InputPer1kUSD, s.Cost.CachedInputPer1kUSD = 0.001, usd(0.002)
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: s})
		}, `model "m-1" prices cached input tokens at 0.002 US dollars per 1k, above the input price of 0.001`},
		{"negative cached input price", func(c *gateway.Config) {
			s := chat
			s.Cost.InputPer1kUSD, s.Cost.CachedInputPer1kUSD = 0.001, usd(-0.0005)
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: s})
		}, "invalid cached input price of -0.0005"},
		{"NaN cached input price", func(c *gateway.Config) {
			s := chat
			s.Cost.InputPer1kUSD, s.Cost.CachedInputPer1kUSD = 0.001, usd(math.NaN())
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: s})
		}, "invalid cached input price of NaN"},
		{"negative 5m cache-write price", func(c *gateway.Config) {
			s := chat
			s.Cost.CacheWrite5mPer1kUSD = usd(-1)
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: s})
		}, "invalid 5m cache-write price of -1"},
		{"NaN 1h cache-write price", func(c *gateway.Config) {
			s := chat
			s.Cost.CacheWrite1hPer1kUSD = usd(math.NaN())
			c.Models = append(c.Models, gateway.PinnedModel{Alias: "x", Spec: s})
		}, "invalid 1h cache-write price of NaN"},
		{"budget without limit", func(c *gateway.Config) {
			c.Budgets = append(c.Budgets, gateway.Budget{Name: "free", Scope: gateway.ScopeRun})
		}, "sets neither"},
		{"budget of NaN dollars", func(c *gateway.Config) {
			c.Budgets = append(c.Budgets, gateway.Budget{Name: "nan", MaxUSD: math.NaN(), Scope: gateway.ScopeRun})
		}, `budget "nan" has an invalid limit`},
		{"budget of infinite dollars", func(c *gateway.Config) {
			c.Budgets = append(c.Budgets, gateway.Budget{Name: "inf", MaxUSD: math.Inf(1), Scope: gateway.ScopeRun})
		}, `budget "inf" has an invalid limit`},
		{"budget with bad scope", func(c *gateway.Config) {
			c.Budgets = append(c.Budgets, gateway.Budget{Name: "b", MaxUSD: 1, Scope: "user"})
		}, `unknown scope "user"`},
		{"budget with a bad window", func(c *gateway.Config) {
			c.Budgets = append(c.Budgets, gateway.Budget{Name: "b", MaxUSD: 1, Scope: gateway.ScopeTenant, Window: "10s"})
		}, `budget "b": window "10s" is outside 30s to 365d`},
		{"budget in an unknown time zone", func(c *gateway.Config) {
			c.Budgets = append(c.Budgets, gateway.Budget{Name: "b", MaxUSD: 1, Scope: gateway.ScopeTenant, Window: "day", TimeZone: "Europe/Atlantis"})
		}, `budget "b": unknown time zone "Europe/Atlantis"`},
		{"run budget applying to all calls", func(c *gateway.Config) {
			c.Budgets = append(c.Budgets, gateway.Budget{Name: "b", MaxUSD: 1, Scope: gateway.ScopeRun, AppliesToAll: true})
		}, `budget "b" applies to all calls, so it cannot be run-scoped`},
		{"rate limit without a limit", func(c *gateway.Config) {
			c.RateLimits = append(c.RateLimits, gateway.RateLimit{Name: "r", Scope: gateway.RateScopeKey})
		}, `rate limit "r" sets neither requests nor tokens per minute`},
		{"key rate limit naming a model", func(c *gateway.Config) {
			c.RateLimits = append(c.RateLimits, gateway.RateLimit{Name: "r", Scope: gateway.RateScopeKey, Model: "m-1", RequestsPerMinute: 1})
		}, `only a model-scoped limit names a model`},
		{"duplicate budget", func(c *gateway.Config) {
			c.Budgets = append(c.Budgets, gateway.Budget{Name: "org", MaxUSD: 1, Scope: gateway.ScopeGlobal})
		}, `budget "org" is defined twice`},
		{"bad retry policy", func(c *gateway.Config) { c.Retry.MaxAttempts = -1 }, "invalid retry policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := fake.New(fake.Config{Analyzer: analysis.English{}})
			cfg := gateway.Config{Models: catalog(), Providers: map[string]gateway.Provider{"fake": p}, Budgets: budgets}
			tt.edit(&cfg)
			_, err := gateway.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestResolveAndProviderFor(t *testing.T) {
	g, p := newGateway(t, fake.Config{Analyzer: analysis.English{}})
	pm, err := g.Resolve("small")
	if err != nil || pm.Spec.ID != "fake-small-2024-07-18" || pm.Alias != "small" {
		t.Fatalf("Resolve(small) = %+v, %v", pm, err)
	}
	prov, err := g.ProviderFor("small")
	if err != nil || prov != gateway.Provider(p) {
		t.Fatalf("ProviderFor(small) = %v, %v", prov, err)
	}
	_, err = g.Resolve("gpt-4o")
	var unknown *gateway.UnknownModelAliasError
	if !errors.As(err, &unknown) {
		t.Fatalf("Resolve(gpt-4o): %v, want *UnknownModelAliasError", err)
	}
	if want := []string{"embed", "large", "plain", "small"}; !slices.Equal(unknown.Known, want) {
		t.Errorf("known aliases %v, want %v", unknown.Known, want)
	}
	if _, err := g.ProviderFor("gpt-4o"); !errors.As(err, &unknown) {
		t.Errorf("ProviderFor(gpt-4o): %v, want *UnknownModelAliasError", err)
	}
	if got := g.Aliases(); !slices.Equal(got, []string{"embed", "large", "plain", "small"}) {
		t.Errorf("Aliases() = %v", got)
	}
}

func TestRequire(t *testing.T) {
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Capabilities: []gateway.Capability{gateway.CapabilityJSON, gateway.CapabilityStreaming, gateway.CapabilityEmbeddings}})
	tests := []struct {
		alias string
		caps  []gateway.Capability
		want  *gateway.CapabilityMismatchError // nil: satisfied
	}{
		{"large", []gateway.Capability{gateway.CapabilityJSON, gateway.CapabilityStreaming}, nil},
		{"large", []gateway.Capability{gateway.CapabilityTools}, &gateway.CapabilityMismatchError{
			Alias: "large", Model: "fake-large-2024-08-06", Provider: "fake",
			MissingInProvider: []gateway.Capability{gateway.CapabilityTools},
		}},
		{"plain", []gateway.Capability{gateway.CapabilityJSON}, &gateway.CapabilityMismatchError{
			Alias: "plain", Model: "fake-plain-1", Provider: "fake",
			MissingInModel: []gateway.Capability{gateway.CapabilityJSON},
		}},
		{"plain", []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityVision}, &gateway.CapabilityMismatchError{
			Alias: "plain", Model: "fake-plain-1", Provider: "fake",
			MissingInModel:    []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityVision},
			MissingInProvider: []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityVision},
		}},
		{"embed", []gateway.Capability{gateway.CapabilityEmbeddings}, nil},
		{"large", []gateway.Capability{gateway.CapabilityEmbeddings}, &gateway.CapabilityMismatchError{
			Alias: "large", Model: "fake-large-2024-08-06", Provider: "fake",
			MissingInModel: []gateway.Capability{gateway.CapabilityEmbeddings},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.alias+"/"+joinCaps(tt.caps), func(t *testing.T) {
			err := g.Require(tt.alias, tt.caps...)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Require: %v", err)
				}
				return
			}
			var got *gateway.CapabilityMismatchError
			if !errors.As(err, &got) {
				t.Fatalf("Require: %v, want *CapabilityMismatchError", err)
			}
			if diff := gocmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if err := g.Require("nope"); err == nil {
		t.Error("Require(nope) succeeded")
	}
	err := g.Require("plain", gateway.CapabilityTools)
	if msg := err.Error(); !strings.Contains(msg, "model lacks [tools]") || !strings.Contains(msg, `provider "fake" adapter lacks [tools]`) {
		t.Errorf("message %q does not say what is missing on which side", msg)
	}
}

func joinCaps(cs []gateway.Capability) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, string(c))
	}
	return strings.Join(parts, "+")
}

func TestGeneratePricesAndRecords(t *testing.T) {
	usage := &gateway.Usage{InputTokens: 1000, OutputTokens: 50, TotalTokens: 1050}
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: "Paris", Usage: usage}}})
	res, err := g.Generate(t.Context(), "large", user("Capital of France?"))
	if err != nil {
		t.Fatal(err)
	}
	want := gateway.Result{
		Text: "Paris", FinishReason: gateway.FinishStop, Usage: *usage,
		CostUSD: 0.0025 + 0.0005, Alias: "large", Model: "fake-large-2024-08-06",
		Attempts: []gateway.Attempt{{Alias: "large", Model: "fake-large-2024-08-06"}},
	}
	if diff := gocmp.Diff(want, res, cmpopts.IgnoreFields(gateway.Attempt{}, "Duration"), cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	s, err := g.Spend(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	spent := gateway.Amount{NanoUSD: 3_000_000, Tokens: 1050}
	if s.Total != spent || len(s.ByAlias) != 1 || s.ByAlias[0].Name != "large" || s.ByModel[0].Name != "fake-large-2024-08-06" {
		t.Errorf("spend summary %+v, want one large call of %+v", s, spent)
	}
}

func TestGenerateBoundsOutputToWhatItReserved(t *testing.T) {
	tests := []struct {
		name      string
		requested int
		want      int
	}{
		{"unset takes the model bound", 0, 100},
		{"smaller is kept", 7, 7},
		{"larger is cut to the model bound", 100000, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, p := newGateway(t, fake.Config{Analyzer: analysis.English{}, Record: true})
			req := user("hi")
			req.MaxOutputTokens = tt.requested
			if _, err := g.Generate(t.Context(), "large", req); err != nil {
				t.Fatal(err)
			}
			if got := p.Requests()[0].MaxOutputTokens; got != tt.want {
				t.Errorf("provider saw max output %d, want %d", got, tt.want)
			}
		})
	}
}

func TestGenerateFallback(t *testing.T) {
	large, small := "fake-large-2024-08-06", "fake-small-2024-07-18"
	tests := []struct {
		name     string
		alias    string // default large
		content  string // default "hello"
		byModel  map[string][]fake.Step
		opts     []gateway.CallOption
		wantText string
		wantErr  func(error) bool
		// attempts as alias:retry:failed
		wantAttempts []string
		wantFellBack bool
		wantCalls    int
	}{
		{
			name:         "first alias answers",
			byModel:      map[string][]fake.Step{large: {{Text: "ok"}}},
			opts:         []gateway.CallOption{gateway.WithFallbacks("small")},
			wantText:     "ok",
			wantAttempts: []string{"large:0:ok"},
			wantCalls:    1,
		},
		{
			name:         "retryable error is retried before falling back",
			byModel:      map[string][]fake.Step{large: {{Err: serverError(503)}, {Text: "second try"}}},
			opts:         []gateway.CallOption{gateway.WithFallbacks("small")},
			wantText:     "second try",
			wantAttempts: []string{"large:0:failed", "large:1:ok"},
			wantCalls:    2,
		},
		{
			name:         "retries used up, then the fallback answers",
			byModel:      map[string][]fake.Step{large: {{Err: serverError(500)}, {Err: serverError(500)}}, small: {{Text: "from small"}}},
			opts:         []gateway.CallOption{gateway.WithFallbacks("small")},
			wantText:     "from small",
			wantAttempts: []string{"large:0:failed", "large:1:failed", "small:0:ok"},
			wantFellBack: true,
			wantCalls:    3,
		},
		{
			name:         "non-retryable provider error falls back at once",
			byModel:      map[string][]fake.Step{large: {{Err: serverError(400)}}, small: {{Text: "from small"}}},
			opts:         []gateway.CallOption{gateway.WithFallbacks("small")},
			wantText:     "from small",
			wantAttempts: []string{"large:0:failed", "small:0:ok"},
			wantFellBack: true,
			wantCalls:    2,
		},
		{
			name:         "a plain adapter error counts as a provider error",
			byModel:      map[string][]fake.Step{large: {{Err: errors.New("socket on fire")}}, small: {{Text: "from small"}}},
			opts:         []gateway.CallOption{gateway.WithFallbacks("small")},
			wantText:     "from small",
			wantAttempts: []string{"large:0:failed", "small:0:ok"},
			wantFellBack: true,
			wantCalls:    2,
		},
		{
			name:    "every alias fails",
			byModel: map[string][]fake.Step{large: {{Err: serverError(400)}}, small: {{Err: serverError(401)}}},
			opts:    []gateway.CallOption{gateway.WithFallbacks("small")},
			wantErr: func(err error) bool {
				var ce *gateway.CallError
				var pe *gateway.ProviderError
				return errors.As(err, &ce) && len(ce.Attempts) == 2 && errors.As(err, &pe) && pe.StatusCode == 401
			},
			wantCalls: 2,
		},
		{
			name:    "a deferred feature does not fall through",
			byModel: map[string][]fake.Step{large: {{Err: &kind.DeferredError{Feature: "audio input"}}}, small: {{Text: "never"}}},
			opts:    []gateway.CallOption{gateway.WithFallbacks("small")},
			wantErr: func(err error) bool {
				var de *kind.DeferredError
				return errors.As(err, &de) && de.Feature == "audio input"
			},
			wantCalls: 1,
		},
		{
			// 920 bytes hold at most 927 input tokens (one per byte plus the
			// overheads): with small's 50 output tokens the worst case fits the
			// 1000-token chat budget, with large's 100 it does not.
			name:    "the fallback's budget refusal stops the chain",
			alias:   "small",
			content: strings.Repeat("x", 920),
			byModel: map[string][]fake.Step{small: {{Err: serverError(400)}}, large: {{Text: "never"}}},
			opts:    []gateway.CallOption{gateway.WithFallbacks("large"), gateway.WithBudget("chat", "t1")},
			wantErr: func(err error) bool {
				var be *gateway.BudgetExceededError
				var ce *gateway.CallError
				return errors.As(err, &be) && be.Budget == "chat" && errors.As(err, &ce) && len(ce.Attempts) == 1
			},
			wantCalls: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, p := newGateway(t, fake.Config{Analyzer: analysis.English{}, ByModel: tt.byModel})
			alias, content := cmp.Or(tt.alias, "large"), cmp.Or(tt.content, "hello")
			res, err := g.Generate(t.Context(), alias, user(content), tt.opts...)
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) {
					t.Fatalf("Generate: %v (%T), not the error wanted", err, err)
				}
			} else {
				if err != nil {
					t.Fatalf("Generate: %v", err)
				}
				if res.Text != tt.wantText || res.FellBack != tt.wantFellBack {
					t.Errorf("got %q fellBack=%v, want %q fellBack=%v", res.Text, res.FellBack, tt.wantText, tt.wantFellBack)
				}
				var got []string
				for _, a := range res.Attempts {
					state := "ok"
					if a.Err != nil {
						state = "failed"
					}
					got = append(got, a.Alias+":"+string(rune('0'+a.Retry))+":"+state)
				}
				if diff := gocmp.Diff(tt.wantAttempts, got); diff != "" {
					t.Errorf("attempts (-want +got):\n%s", diff)
				}
			}
			if p.Calls() != tt.wantCalls {
				t.Errorf("provider called %d times, want %d", p.Calls(), tt.wantCalls)
			}
			s, _ := g.Spend(t.Context())
			for _, a := range s.ByAccount {
				if a.Reserved != (gateway.Amount{}) {
					t.Errorf("account %v still holds %+v", a.Account, a.Reserved)
				}
			}
		})
	}
}

func TestGenerateChecksEveryAliasBeforeCalling(t *testing.T) {
	tests := []struct {
		name  string
		req   gateway.Request
		chain []string
		check func(error) bool
	}{
		{"unknown fallback", user("hi"), []string{"small", "gpt-5"}, func(err error) bool {
			var e *gateway.UnknownModelAliasError
			return errors.As(err, &e) && e.Alias == "gpt-5"
		}},
		{"fallback cannot use tools", gateway.Request{
			Messages: user("hi").Messages,
			Tools:    []gateway.ToolDef{{Name: "lookup_order", Parameters: []byte(`{"type":"object"}`)}},
		}, []string{"large", "plain"}, func(err error) bool {
			var e *gateway.CapabilityMismatchError
			return errors.As(err, &e) && e.Alias == "plain" && slices.Equal(e.MissingInModel, []gateway.Capability{gateway.CapabilityTools})
		}},
		{"fallback cannot do json", gateway.Request{
			Messages:       user("hi").Messages,
			ResponseFormat: &gateway.JSONSchema{Name: "answer", Schema: []byte(`{"type":"object"}`)},
		}, []string{"large", "plain"}, func(err error) bool {
			var e *gateway.CapabilityMismatchError
			return errors.As(err, &e) && e.Alias == "plain"
		}},
		{"unknown budget", user("hi"), []string{"large"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, p := newGateway(t, fake.Config{Analyzer: analysis.English{}})
			opts := []gateway.CallOption{gateway.WithFallbacks(tt.chain[1:]...)}
			if tt.check == nil {
				opts = append(opts, gateway.WithBudget("weekly", "r1"))
			}
			_, err := g.Generate(t.Context(), tt.chain[0], tt.req, opts...)
			if err == nil {
				t.Fatal("Generate succeeded")
			}
			if tt.check != nil && !tt.check(err) {
				t.Errorf("Generate: %v, not the error wanted", err)
			}
			if gateway.IsFallbackEligible(err) {
				t.Errorf("%v is fallback-eligible", err)
			}
			if p.Calls() != 0 {
				t.Errorf("provider was called %d times before the check failed", p.Calls())
			}
		})
	}
}

func TestIsFallbackEligible(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{serverError(500), true},
		{serverError(400), true},
		{&gateway.ProviderError{Timeout: true, Retryable: true}, true},
		{&gateway.CallError{Op: "generate", Err: serverError(502)}, true},
		{&gateway.CallError{Op: "generate", Err: context.Canceled, Attempts: []gateway.Attempt{{Err: serverError(502)}}}, false},
		{&gateway.BudgetExceededError{Budget: "b"}, false},
		{&gateway.CapabilityMismatchError{Alias: "a"}, false},
		{&gateway.UnknownModelAliasError{Alias: "a"}, false},
		{&kind.DeferredError{Feature: "f"}, false},
		{&gateway.ContextWindowExceededError{Alias: "a", ContextWindow: 10}, true},
		{&gateway.CallError{Op: "generate", Err: &gateway.ContextWindowExceededError{Alias: "a"}}, true},
		{&gateway.InvalidRequestError{Field: "messages"}, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{errors.New("unclassified"), false},
	}
	for _, tt := range tests {
		if got := gateway.IsFallbackEligible(tt.err); got != tt.want {
			t.Errorf("IsFallbackEligible(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestGenerateHonoursCancellation(t *testing.T) {
	g, p := newGateway(t, fake.Config{Analyzer: analysis.English{}, Latency: time.Hour})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := g.Generate(ctx, "large", user("hi"), gateway.WithFallbacks("small"), gateway.WithBudget("nightly", "r1"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Generate: %v, want the caller's deadline", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v to notice the deadline", time.Since(start))
	}
	if p.Calls() != 1 {
		t.Errorf("%d calls: the caller's deadline must not fall through", p.Calls())
	}
	s, _ := g.Spend(t.Context())
	if len(s.ByAccount) != 1 || s.ByAccount[0].Reserved != (gateway.Amount{}) || s.Calls != 0 {
		t.Errorf("the cancelled call left %+v", s)
	}
}

func TestBudgets(t *testing.T) {
	tests := []struct {
		name    string
		ctx     func(context.Context) context.Context
		opts    []gateway.CallOption
		wantErr string
		// wantAccounts lists the accounts charged.
		wantAccounts []gateway.Account
	}{
		{name: "no budget", wantAccounts: nil},
		{
			name:         "run budget by option",
			opts:         []gateway.CallOption{gateway.WithBudget("nightly", "run-7")},
			wantAccounts: []gateway.Account{{Budget: "nightly", Scope: gateway.ScopeRun, Key: "run-7"}},
		},
		{
			name: "budgets from the context",
			ctx: func(ctx context.Context) context.Context {
				return gateway.ContextWithBudget(gateway.ContextWithBudget(ctx, "chat", "t-1"), "org", "")
			},
			wantAccounts: []gateway.Account{{Budget: "chat", Scope: gateway.ScopeThread, Key: "t-1"}, {Budget: "org", Scope: gateway.ScopeGlobal}},
		},
		{
			name:         "options replace the context",
			ctx:          func(ctx context.Context) context.Context { return gateway.ContextWithBudget(ctx, "chat", "t-1") },
			opts:         []gateway.CallOption{gateway.WithBudget("nightly", "run-8")},
			wantAccounts: []gateway.Account{{Budget: "nightly", Scope: gateway.ScopeRun, Key: "run-8"}},
		},
		{
			name:         "global budget ignores the key",
			opts:         []gateway.CallOption{gateway.WithBudget("org", "whatever"), gateway.WithBudget("org", "")},
			wantAccounts: []gateway.Account{{Budget: "org", Scope: gateway.ScopeGlobal}},
		},
		{name: "run budget without key", opts: []gateway.CallOption{gateway.WithBudget("nightly", "")}, wantErr: "must give the run id"},
		{name: "unknown budget", opts: []gateway.CallOption{gateway.WithBudget("weekly", "r")}, wantErr: `unknown budget "weekly" (known: chat, nightly, org)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}})
			ctx := t.Context()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}
			res, err := g.Generate(ctx, "small", user("hi"), tt.opts...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Generate: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s, _ := g.Spend(t.Context())
			var got []gateway.Account
			for _, a := range s.ByAccount {
				got = append(got, a.Account)
				if a.Spent.USD() != res.CostUSD || a.Calls != 1 {
					t.Errorf("account %v spent %v over %d calls, want %v over 1", a.Account, a.Spent.USD(), a.Calls, res.CostUSD)
				}
			}
			if diff := gocmp.Diff(tt.wantAccounts, got); diff != "" {
				t.Errorf("accounts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBudgetRefusesBeforeCalling(t *testing.T) {
	g, p := newGateway(t, fake.Config{Analyzer: analysis.English{}})
	// A run budget of $0.01 and large's worst case of 100 output tokens at
	// $0.01/1k plus input: about $0.001 a call; ten calls fit, then refusal.
	req := user(strings.Repeat("word ", 40))
	var refused *gateway.BudgetExceededError
	calls := 0
	for range 50 {
		_, err := g.Generate(t.Context(), "large", req, gateway.WithBudget("nightly", "run-1"))
		if errors.As(err, &refused) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		calls++
	}
	if refused == nil {
		t.Fatal("the budget never refused")
	}
	if calls != p.Calls() {
		t.Errorf("provider saw %d calls, %d were allowed: a refused call must not reach it", p.Calls(), calls)
	}
	if refused.Budget != "nightly" || refused.Scope != gateway.ScopeRun || refused.Key != "run-1" || refused.Dimension != gateway.DimensionUSD {
		t.Errorf("refusal names the wrong budget: %+v", refused)
	}
	if refused.Spent.Add(refused.Reserved).Add(refused.Requested).NanoUSD <= refused.Limit.NanoUSD {
		t.Errorf("refused although it fits: %+v", refused)
	}
	if msg := refused.Error(); !strings.Contains(msg, `budget "nightly" (run run-1) exceeded`) || !strings.Contains(msg, "limit $0.01") {
		t.Errorf("message %q", msg)
	}
	// Another run has its own account.
	if _, err := g.Generate(t.Context(), "large", req, gateway.WithBudget("nightly", "run-2")); err != nil {
		t.Errorf("run-2 was refused: %v", err)
	}
	if gateway.IsFallbackEligible(refused) {
		t.Error("a budget refusal must not fall through")
	}
}

func TestEstimates(t *testing.T) {
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}})
	req := user(strings.Repeat("a", 40)) // 40 bytes + 4 per message + 3 priming
	u, err := g.EstimateUsage("large", req)
	if err != nil {
		t.Fatal(err)
	}
	if want := (gateway.Usage{InputTokens: 47, OutputTokens: 100, TotalTokens: 147, Estimated: true}); u != want {
		t.Errorf("EstimateUsage = %+v, want %+v", u, want)
	}
	cost, err := g.EstimateCost("large", req)
	if err != nil {
		t.Fatal(err)
	}
	if want := 47*0.0025/1000 + 100*0.01/1000; cost < want-1e-12 || cost > want+1e-9 {
		t.Errorf("EstimateCost = %v, want %v", cost, want)
	}
	if _, err := g.EstimateCost("nope", req); err == nil {
		t.Error("EstimateCost(nope) succeeded")
	}
	var window *gateway.ContextWindowExceededError
	if _, err := g.EstimateCost("large", user(strings.Repeat("word ", 120000))); !errors.As(err, &window) {
		t.Errorf("EstimateCost of a prompt beyond the window: %v, want *ContextWindowExceededError", err)
	}
	var invalid *gateway.InvalidRequestError
	if _, err := g.EstimateUsage("large", gateway.Request{}); !errors.As(err, &invalid) {
		t.Errorf("EstimateUsage of no messages: %v, want *InvalidRequestError", err)
	}
}

// TestEstimateIsWhatABudgetReserves sets a budget to exactly EstimateCost
// (and another to exactly EstimateUsage's tokens) and checks that the call
// fits, and that one nanodollar or one token less does not: the estimate is
// the reservation, not a different guess.
func TestEstimateIsWhatABudgetReserves(t *testing.T) {
	tests := []struct {
		name  string
		alias string
		req   gateway.Request
	}{
		{"small prompt", "small", user("What is the capital of France?")},
		{"long prompt", "large", user(strings.Repeat("refund policy ", 3000))},
		{"prompt of more bytes than the window holds tokens", "large", user(strings.Repeat("abcdefgh", 20000))},
		{"output bound from the request", "large", func() gateway.Request { r := user("hi"); r.MaxOutputTokens = 7; return r }()},
		{"tools and schema", "small", gateway.Request{
			Messages:       user("Where is A-42?").Messages,
			Tools:          []gateway.ToolDef{{Name: "lookup_order", Description: "Find an order", Parameters: []byte(`{"type":"object"}`)}},
			ResponseFormat: &gateway.JSONSchema{Name: "answer", Schema: []byte(`{"type":"object"}`)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g0, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}})
			cost, err := g0.EstimateCost(tt.alias, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			u, err := g0.EstimateUsage(tt.alias, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range []struct {
				budget gateway.Budget
				fits   bool
			}{
				{gateway.Budget{MaxUSD: cost}, true},
				{gateway.Budget{MaxUSD: cost - 1e-9}, false},
				{gateway.Budget{MaxTotalTokens: u.TotalTokens}, true},
				{gateway.Budget{MaxTotalTokens: u.TotalTokens - 1}, false},
			} {
				b.budget.Name, b.budget.Scope = "exact", gateway.ScopeGlobal
				g, p := newGateway(t, fake.Config{Analyzer: analysis.English{}}, func(c *gateway.Config) { c.Budgets = []gateway.Budget{b.budget} })
				_, err := g.Generate(t.Context(), tt.alias, tt.req, gateway.WithBudget("exact", ""))
				var be *gateway.BudgetExceededError
				switch {
				case b.fits && err != nil:
					t.Errorf("budget %+v set to the estimate refused the call: %v", b.budget, err)
				case !b.fits && !errors.As(err, &be):
					t.Errorf("budget %+v below the estimate: %v, want a refusal", b.budget, err)
				case !b.fits && p.Calls() != 0:
					t.Errorf("a refused call reached the provider")
				}
			}
		})
	}
}

// TestProviderRetry checks that a provider's own retry policy replaces the
// gateway's for that provider's aliases only.
func TestProviderRetry(t *testing.T) {
	script := func() []fake.Step {
		return []fake.Step{{Err: serverError(503)}, {Err: serverError(503)}, {Err: serverError(503)}}
	}
	tests := []struct {
		name         string
		retry        map[string]gateway.RetryPolicy
		wantAttempts int
	}{
		{"gateway policy", nil, fastRetry.MaxAttempts},
		{"provider policy", map[string]gateway.RetryPolicy{"fake": {MaxAttempts: 1, BaseDelay: time.Millisecond}}, 1},
		{"another provider's policy", map[string]gateway.RetryPolicy{"other": {MaxAttempts: 1}}, fastRetry.MaxAttempts},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Script: script()}, func(c *gateway.Config) { c.ProviderRetry = tt.retry })
			_, err := g.Generate(t.Context(), "large", user("hi"))
			var ce *gateway.CallError
			if !errors.As(err, &ce) {
				t.Fatalf("Generate = %v, want a CallError", err)
			}
			if len(ce.Attempts) != tt.wantAttempts {
				t.Errorf("%d attempts, want %d", len(ce.Attempts), tt.wantAttempts)
			}
		})
	}
	_, err := gateway.New(gateway.Config{
		Models:        catalog(),
		Providers:     map[string]gateway.Provider{"fake": mustFake(t)},
		ProviderRetry: map[string]gateway.RetryPolicy{"fake": {MaxAttempts: -1}},
	})
	if err == nil {
		t.Error("New accepted a negative provider retry policy")
	}
}

func mustFake(t *testing.T) *fake.Provider {
	p, err := fake.New(fake.Config{Analyzer: analysis.English{}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
