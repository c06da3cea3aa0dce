package cli_test

import (
	"os"
	"testing"

	"github.com/aidgen/aid/internal/cli"
)

// TestMain turns the embedding cache off for the package's tests, so that
// none writes to the user's cache directory and every command's model
// calls are its own; the tests of the cache turn it on in a directory of
// their own. With AIDGEN_TEST_MAIN=1 the test binary is aidgen itself, for
// the tests that run a command as a process of its own and kill it.
func TestMain(m *testing.M) {
	os.Setenv("AID_EMBED_CACHE", "off")
	if os.Getenv("AIDGEN_TEST_MAIN") == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
