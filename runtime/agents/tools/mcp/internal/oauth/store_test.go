package oauth

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStore: a record is stored encrypted and read back; another server's
// binding, another key, an edited file or a key file others may read are
// refused; nothing stored is ErrNoTokens.
func TestStore(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenStore(dir, "notes", "https://notes/mcp\x00client", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(); !errors.Is(err, ErrNoTokens) {
		t.Errorf("nothing stored: %v", err)
	}
	rec := Record{AccessToken: "access-secret-123", RefreshToken: "refresh-secret-456", Expiry: time.Unix(2e9, 0).UTC(), Issued: time.Unix(2e9-3600, 0).UTC(), TokenURL: "https://as/token"}
	if err := st.Save(rec); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(st.Path())
	if bytes.Contains(raw, []byte("secret")) || bytes.Contains(raw, []byte("https://as")) {
		t.Errorf("the file holds the record in clear: %q", raw)
	}
	for _, p := range []string{st.Path(), filepath.Join(dir, KeyFile)} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v", p, fi.Mode(), err)
		}
	}
	got, err := st.Load()
	if err != nil || *got != rec {
		t.Fatalf("Load = %+v, %v", got, err)
	}

	// The same name for another server (another URL) reads nothing: its
	// file name differs; a file copied over it does not decrypt.
	other, _ := OpenStore(dir, "notes", "https://evil/mcp\x00client", "")
	if _, err := other.Load(); !errors.Is(err, ErrNoTokens) {
		t.Errorf("another server's store: %v", err)
	}
	if err := os.WriteFile(other.Path(), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Load(); !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "does not decrypt") {
		t.Errorf("a file copied to another server's name: %v", err)
	}

	// Edited.
	edited := bytes.Clone(raw)
	edited[len(edited)-1] ^= 1
	if err := os.WriteFile(st.Path(), edited, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Load(); !errors.Is(err, ErrUnreadable) {
		t.Errorf("an edited file: %v", err)
	}

	// A key from the environment: another key does not decrypt; a bad one
	// is refused up front.
	withKey, err := OpenStore(dir, "keyed", "b", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	if err != nil {
		t.Fatal(err)
	}
	if err := withKey.Save(rec); err != nil {
		t.Fatal(err)
	}
	wrong, _ := OpenStore(dir, "keyed", "b", "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=")
	if _, err := wrong.Load(); !errors.Is(err, ErrUnreadable) {
		t.Errorf("another key: %v", err)
	}
	if _, err := OpenStore(dir, "keyed", "b", "short"); err == nil || !strings.Contains(err.Error(), "32 bytes") {
		t.Errorf("a key too short: %v", err)
	}

	// A key file others may read is refused.
	if err := os.Chmod(filepath.Join(dir, KeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.Save(rec); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a key file others may read: %v", err)
	}
}
