package gateway_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func TestEmbed(t *testing.T) {
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Seed: 7})
	texts := []string{"refund policy for orders", "refund policy for orders", "orders refund", "weather in Lisbon"}
	res, err := g.Embed(t.Context(), "embed", texts, gateway.WithBudget("org", ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Vectors) != len(texts) || res.Alias != "embed" || res.Model != "fake-embed-3" || len(res.Attempts) != 1 {
		t.Fatalf("result %+v", res)
	}
	for i, v := range res.Vectors {
		if len(v) != 8 {
			t.Fatalf("vector %d has width %d", i, len(v))
		}
		if n := cosine(v, v); math.Abs(n-1) > 1e-5 {
			t.Errorf("vector %d is not a unit vector", i)
		}
	}
	if c := cosine(res.Vectors[0], res.Vectors[1]); c < 0.9999 {
		t.Errorf("equal texts have cosine %v", c)
	}
	if shared, none := cosine(res.Vectors[0], res.Vectors[2]), cosine(res.Vectors[0], res.Vectors[3]); shared <= none {
		t.Errorf("texts sharing words (cosine %v) are no closer than unrelated ones (%v)", shared, none)
	}
	if res.Usage.InputTokens == 0 || res.CostUSD <= 0 {
		t.Errorf("embedding was not charged: %+v", res)
	}
	s := assertSettled(t, g, 1)
	if len(s.ByAccount) != 1 || s.ByAccount[0].Account.Budget != "org" {
		t.Errorf("embedding not charged to the budget: %+v", s.ByAccount)
	}
	again, err := g.Embed(t.Context(), "embed", texts[:1])
	if err != nil || cosine(again.Vectors[0], res.Vectors[0]) < 0.9999 {
		t.Errorf("embedding is not deterministic: %v", err)
	}
	other, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Seed: 8})
	o, err := other.Embed(t.Context(), "embed", texts[:1])
	if err != nil || cosine(o.Vectors[0], res.Vectors[0]) > 0.9999 {
		t.Errorf("another seed gives the same vector: %v", err)
	}
}

func TestEmbedRefusals(t *testing.T) {
	tests := []struct {
		name  string
		alias string
		texts []string
		opts  []gateway.CallOption
		check func(error) bool
	}{
		{"chat model", "large", []string{"x"}, nil, func(err error) bool {
			var e *gateway.CapabilityMismatchError
			return errors.As(err, &e)
		}},
		{"unknown alias", "nope", []string{"x"}, nil, func(err error) bool {
			var e *gateway.UnknownModelAliasError
			return errors.As(err, &e)
		}},
		{"fallbacks", "embed", []string{"x"}, []gateway.CallOption{gateway.WithFallbacks("embed")}, func(err error) bool {
			return strings.Contains(err.Error(), "embeddings take no fallbacks")
		}},
		{"budget", "embed", []string{strings.Repeat("x", 8000)}, []gateway.CallOption{gateway.WithBudget("chat", "t")}, func(err error) bool {
			var e *gateway.BudgetExceededError
			return errors.As(err, &e)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}})
			_, err := g.Embed(t.Context(), tt.alias, tt.texts, tt.opts...)
			if err == nil || !tt.check(err) {
				t.Fatalf("Embed: %v, not the error wanted", err)
			}
		})
	}
}

func TestEmbedEmptyInputMakesNoCall(t *testing.T) {
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}})
	res, err := g.Embed(t.Context(), "embed", nil)
	if err != nil || len(res.Vectors) != 0 {
		t.Fatalf("Embed(nil) = %+v, %v", res, err)
	}
	assertSettled(t, g, 0)
}

// shapeProvider returns vectors of the wrong width, then of the right one.
type shapeProvider struct {
	gateway.Provider
	calls int
}

func (p *shapeProvider) Embed(ctx context.Context, m gateway.ModelSpec, texts []string) (gateway.EmbedResponse, error) {
	p.calls++
	width := m.Dimensions
	if p.calls == 1 {
		width++
	}
	vs := make([][]float32, len(texts))
	for i := range vs {
		vs[i] = make([]float32, width)
	}
	return gateway.EmbedResponse{Vectors: vs}, nil
}

func TestEmbedRejectsAWrongWidth(t *testing.T) {
	base, _ := fake.New(fake.Config{Analyzer: analysis.English{}})
	sp := &shapeProvider{Provider: base}
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}}, func(c *gateway.Config) { c.Providers["fake"] = sp })
	_, err := g.Embed(t.Context(), "embed", []string{"a"})
	var pe *gateway.ProviderError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "width 9, want the pinned 8") {
		t.Fatalf("Embed: %v, want a width error", err)
	}
	assertSettled(t, g, 0)
}
