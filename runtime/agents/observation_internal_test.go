package agents

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestBoundObservation checks the cut itself: never over the limit, at a
// rune boundary, as close to the limit as the marker allows, and the
// marker's count adds up.
func TestBoundObservation(t *testing.T) {
	for _, c := range []struct {
		name  string
		obs   string
		limit int
	}{
		{"ascii", strings.Repeat("a", 5000), 1024},
		{"two-byte runes", strings.Repeat("é", 5000), 1024},
		{"three-byte runes", strings.Repeat("€", 5000), 1025},
		{"four-byte runes", strings.Repeat("𝄞", 5000), 1027},
		{"invalid UTF-8", strings.Repeat("\xff", 5000), 1024},
		{"one byte over", strings.Repeat("a", 1025), 1024},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := boundObservation(c.obs, c.limit)
			if len(got) > c.limit || len(got) < c.limit-4 {
				t.Fatalf("%d bytes for a limit of %d", len(got), c.limit)
			}
			i := strings.LastIndex(got, "\n…[observation cut by aid: ")
			if i < 0 {
				t.Fatalf("no marker: %q", got[max(0, len(got)-100):])
			}
			kept := got[:i]
			if !strings.HasPrefix(c.obs, kept) || (utf8.ValidString(c.obs) && !utf8.ValidString(kept)) {
				t.Fatalf("kept %d bytes that are not a clean prefix", len(kept))
			}
			if want := cutMarker(len(c.obs)-len(kept), len(c.obs)); got[i:] != want {
				t.Fatalf("marker %q, want %q", got[i:], want)
			}
		})
	}
	if got := boundObservation("short", 1024); got != "short" {
		t.Fatalf("a short observation changed: %q", got)
	}
	exact := strings.Repeat("a", 1024)
	if got := boundObservation(exact, 1024); got != exact {
		t.Fatal("an observation exactly at the limit changed")
	}
}
