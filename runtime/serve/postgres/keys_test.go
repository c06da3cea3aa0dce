package postgres_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/serve"
	"github.com/aidgen/aid/runtime/serve/postgres"
	"github.com/aidgen/aid/runtime/service"
	"github.com/aidgen/aid/runtime/service/pgkeys"
)

// TestServeAcceptsKeysCreatedAtRunTime: a PostgreSQL-state service with a
// declared key enabled (so it authenticates) also accepts a key created in
// its database (serve.Options.OpenKeys), as that key's tenant; a declared
// key whose variable is unset is disabled with a warning.
func TestServeAcceptsKeysCreatedAtRunTime(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	admin, err := pgkeys.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	secret, err := admin.Create(t.Context(), "bot", []service.Role{service.RoleCaller}, "acme")
	if err != nil {
		t.Fatal(err)
	}
	desc := app.Description{
		Name: "desk", Version: "0.1.0", Dir: t.TempDir(),
		Providers: []app.Provider{{Name: "fake", Kind: fake.Kind{Seed: 1}}},
		Models: []gateway.PinnedModel{{Alias: "m", Spec: gateway.ModelSpec{ID: "fake-1", Provider: "fake", Kind: gateway.KindChat,
			ContextWindow: 8192, MaxOutputTokens: 64, Cost: gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002}}}},
		Agents: []agents.Agent{{Name: "desk", Model: "m", Instructions: "Answer.", MaxSteps: 2}},
		Service: app.Service{Listen: "127.0.0.1:0", Entry: "desk", Auth: app.Auth{Kind: "none", Keys: []app.Key{
			{Name: "ops", Roles: []string{"operator"}, Tenant: "acme", SecretEnv: "KEY_OPS"},
			{Name: "unset", Roles: []string{"caller"}, SecretEnv: "KEY_UNSET"},
		}}, State: app.State{Kind: app.StatePostgres, DSNEnv: "DESK_DSN"}},
	}
	logs := &servicetest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	env := map[string]string{"DESK_DSN": dsn, "KEY_OPS": "sk-ops-declared"}
	go func() {
		done <- serve.Run(ctx, desc, serve.Options{OpenState: postgres.OpenState, OpenKeys: postgres.OpenKeys}, serve.Process{
			LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			Stderr:    logs,
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if l, ok := logs.LogLine("serving"); ok {
			base = "http://" + l["addr"].(string)
		}
	}
	if base == "" {
		t.Fatalf("the service is not serving:\n%s", logs)
	}
	if l, ok := logs.LogLine(`key "unset" is disabled: KEY_UNSET is not set`); !ok || l["level"] != "WARN" {
		t.Errorf("no warning for the disabled key:\n%s", logs)
	}
	do := func(key, method, path, body string) (int, []byte) {
		st, _, b := servicetest.Do(t, http.DefaultClient, method, base+path, key, strings.NewReader(body))
		return st, b
	}
	st, body := do(secret, "POST", "/v1/runs", `{"input":"hello"}`)
	if st != 200 {
		t.Fatalf("the runtime key: %d %s", st, body)
	}
	if st, body := do("", "GET", "/v1/models", ""); st != http.StatusUnauthorized {
		t.Errorf("no key: %d %s", st, body)
	}
	if st, body := do("sk-ops-declared", "GET", "/v1/runs", ""); st != 200 || !strings.Contains(string(body), `"status":"completed"`) {
		t.Errorf("the declared operator lists acme's runs: %d %s", st, body)
	}
}
