package mcp_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aidgen/aid/internal/servicetest"
)

// modules installs this folder's pinned npm packages (servicetest.NPM) and
// returns the folder's absolute path.
func modules(t *testing.T) string {
	t.Helper()
	return servicetest.NPM(t, ".", "the official MCP servers and client")
}

// module is the path of a file of an installed package.
func module(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(modules(t), "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("npm ci did not install %s: %v", rel, err)
	}
	return p
}
