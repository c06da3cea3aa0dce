package pgkeys_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/service"
	"github.com/aidgen/aid/runtime/service/pgkeys"
)

// replica is a service on the shared database's keys, as one replica of a
// deployment: its own store (pool) and its own cache.
func replica(t *testing.T, dsn string, ttl time.Duration) *httptest.Server {
	t.Helper()
	store, err := pgkeys.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	p, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models:    []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 50}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := agents.New(agents.Config{Gateway: gw, Agents: []agents.Agent{{Name: "desk", Model: "small", Instructions: "Help."}}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.New(service.Config{Gateway: gw, Agents: rt, Auth: service.Auth{Kind: service.AuthBearer, KeyStore: store, KeyCacheTTL: ttl}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return srv
}

func status(t *testing.T, srv *httptest.Server, secret string) int {
	t.Helper()
	st, _, _ := servicetest.Do(t, srv.Client(), "GET", srv.URL+"/v1/models", secret, nil)
	return st
}

// TestRevocationReachesEveryReplica: a key created at run time works on
// both replicas at once; revoked, it is refused by both within the cache's
// TTL, the stated bound, and not before the revocation.
func TestRevocationReachesEveryReplica(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	const ttl = time.Second
	a, b := replica(t, dsn, ttl), replica(t, dsn, ttl)
	admin, err := pgkeys.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	secret, err := admin.Create(t.Context(), "frontend", []service.Role{service.RoleCaller}, "acme")
	if err != nil || !strings.HasPrefix(secret, pgkeys.SecretPrefix) {
		t.Fatalf("create: %q %v", secret, err)
	}
	for _, srv := range []*httptest.Server{a, b} {
		if st := status(t, srv, secret); st != http.StatusOK {
			t.Fatalf("a created key: %d", st)
		}
		if st := status(t, srv, secret+"x"); st != http.StatusUnauthorized {
			t.Fatalf("a wrong secret: %d", st)
		}
	}
	revoked := time.Now()
	if err := admin.Revoke(t.Context(), "frontend"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	refusedAfter := make([]time.Duration, 2)
	for i, srv := range []*httptest.Server{a, b} {
		wg.Go(func() {
			for time.Since(revoked) < 3*ttl {
				if status(t, srv, secret) == http.StatusUnauthorized {
					refusedAfter[i] = time.Since(revoked)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			refusedAfter[i] = -1
		})
	}
	wg.Wait()
	for i, d := range refusedAfter {
		// The bound is the TTL; the slack is this test's polling and one
		// lookup's round trip.
		if d < 0 || d > ttl+250*time.Millisecond {
			t.Errorf("replica %d refused the revoked key after %v, want within %v", i, d, ttl)
		}
	}
	keys, err := admin.List(t.Context())
	if err != nil || len(keys) != 1 || keys[0].Name != "frontend" || keys[0].Tenant != "acme" || keys[0].Revoked.IsZero() {
		t.Fatalf("list: %+v %v", keys, err)
	}
	var exists *pgkeys.ExistsError
	if _, err := admin.Create(t.Context(), "frontend", []service.Role{service.RoleCaller}, "acme"); !errors.As(err, &exists) {
		t.Errorf("re-creating a revoked name: %v", err)
	}
	var nf *pgkeys.NotFoundError
	if err := admin.Revoke(t.Context(), "frontend"); !errors.As(err, &nf) {
		t.Errorf("revoking twice: %v", err)
	}
	var ce *service.ConfigError
	if _, err := admin.Create(t.Context(), "bad", []service.Role{"root"}, ""); !errors.As(err, &ce) {
		t.Errorf("an unknown role: %v", err)
	}
}
