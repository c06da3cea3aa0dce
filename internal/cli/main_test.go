package cli_test

import (
	"os"
	"testing"
)

// TestMain turns the embedding cache off for the package's tests, so that
// none writes to the user's cache directory and every command's model
// calls are its own; the tests of the cache turn it on in a directory of
// their own.
func TestMain(m *testing.M) {
	os.Setenv("AID_EMBED_CACHE", "off")
	os.Exit(m.Run())
}
