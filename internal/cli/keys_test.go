package cli_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
)

// TestKeysCommands creates, lists and revokes a key with the real CLI: the
// secret is printed once, list never prints it, and revoke marks it.
func TestKeysCommands(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	code, out, errOut := run(t, "keys", "create", "frontend", "--role", "caller", "--tenant", "acme", "--dsn", dsn)
	secret := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(secret, "sk-aid-") || !strings.Contains(errOut, "shown only now") {
		t.Fatalf("create: %d %q %q", code, out, errOut)
	}
	code, out, errOut = run(t, "keys", "list", "--dsn", dsn)
	if code != 0 || !strings.Contains(out, "frontend") || !strings.Contains(out, "acme") || strings.Contains(out, secret) {
		t.Fatalf("list: %d %q %q", code, out, errOut)
	}
	if code, _, errOut = run(t, "keys", "revoke", "frontend", "--dsn", dsn); code != 0 || !strings.Contains(errOut, "revoked") {
		t.Fatalf("revoke: %d %q", code, errOut)
	}
	if code, out, _ = run(t, "keys", "list", "--dsn", dsn); code != 0 || strings.Contains(out, "frontend  caller  acme") && strings.HasSuffix(strings.TrimSpace(out), "-") {
		t.Fatalf("list after revoke: %d %q", code, out)
	}
	for _, args := range [][]string{
		{"keys", "create", "x", "--dsn", dsn},
		{"keys", "create", "x", "--role", "caller"},
		{"keys", "revoke", "nobody", "--dsn", dsn},
		{"keys", "create", "y", "--role", "root", "--dsn", dsn},
	} {
		if code, _, errOut := run(t, args...); code == 0 || errOut == "" {
			t.Errorf("%v: %d %q", args, code, errOut)
		}
	}
}
