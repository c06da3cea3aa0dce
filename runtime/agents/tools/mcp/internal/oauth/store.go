package oauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// KeyFile is the name of the key file a Store creates in its directory
// when no key is given: 32 random bytes, mode 0600.
const KeyFile = "key"

// magic starts every token file: its format's version.
const magic = "aid-mcp-oauth-1\n"

// Record is what a login obtained for one server, kept encrypted.
type Record struct {
	AccessToken  string    `json:"access_token"`
	TokenType    string    `json:"token_type,omitempty"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// Issued is when the access token was obtained: with Expiry, its
	// lifetime, from which the margin of its refresh follows.
	Issued time.Time `json:"issued,omitzero"`
	// TokenURL is the token endpoint the tokens came from, which a
	// refresh uses without discovering it again.
	TokenURL string `json:"token_url"`
	// Resource is the resource the tokens are for.
	Resource string `json:"resource,omitempty"`
	// SecretInBody is Endpoints.SecretInBody of the token endpoint.
	SecretInBody bool `json:"secret_in_body,omitempty"`
}

// Lifetime is how long the access token lived when it was issued; zero
// when unknown.
func (r *Record) Lifetime() time.Duration {
	if r.Issued.IsZero() || r.Expiry.IsZero() {
		return 0
	}
	return r.Expiry.Sub(r.Issued)
}

// Token is the record's token.
func (r *Record) Token() *oauth2.Token {
	return &oauth2.Token{AccessToken: r.AccessToken, TokenType: r.TokenType, RefreshToken: r.RefreshToken, Expiry: r.Expiry}
}

// Store keeps one server's tokens in a file of its directory, encrypted
// with AES-256-GCM, authenticated together with what binds them to the
// server (its URL and client id), so that a file copied to another
// server's name, or edited, does not decrypt.
type Store struct {
	dir, path string
	binding   []byte
	key       []byte // nil: the key file's
}

// ErrNoTokens is Load's error when nothing is stored.
var ErrNoTokens = errors.New("no tokens stored")

// ErrUnreadable is Load's error when the stored tokens cannot be read with
// this key for this server: another key, another server's file, an edited
// file, or a key file gone.
var ErrUnreadable = errors.New("the stored tokens cannot be read")

// OpenStore returns the store of the server called name, whose URL and
// client id are binding, in dir. key, when not empty, is the key: 32
// bytes in standard or URL base64 (`openssl rand -base64 32`); otherwise
// the key file in dir is used, created by the first Save.
func OpenStore(dir, name, binding, key string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("no directory for OAuth tokens")
	}
	sum := sha256.Sum256([]byte(binding))
	s := &Store{
		dir:     dir,
		path:    filepath.Join(dir, safeName(name)+"-"+hex.EncodeToString(sum[:6])+".token"),
		binding: []byte("aid mcp oauth\x00" + binding),
	}
	if key != "" {
		k, err := decodeKey(key)
		if err != nil {
			return nil, err
		}
		s.key = k
	}
	return s, nil
}

// Path is the token file's path.
func (s *Store) Path() string { return s.path }

// decodeKey decodes a key given in base64.
func decodeKey(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(v); err == nil && len(k) == 32 {
			return k, nil
		}
	}
	return nil, errors.New("the key is not 32 bytes in base64 (make one with `openssl rand -base64 32`)")
}

// safeName is name with what a file name cannot hold replaced.
func safeName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, name)
}

// keyOf returns the key: the one given, or the key file's, created when
// create is set and it does not exist.
func (s *Store) keyOf(create bool) ([]byte, error) {
	if s.key != nil {
		return s.key, nil
	}
	p := filepath.Join(s.dir, KeyFile)
	if create {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating the token directory: %w", err)
		}
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, werr := f.Write(k)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				_ = os.Remove(p)
				return nil, fmt.Errorf("writing the key file %s: %w", p, werr)
			}
			return k, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("creating the key file %s: %w", p, err)
		}
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("the key file %s may be read by others (mode %v): chmod 600 it", p, fi.Mode().Perm())
	}
	k, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if len(k) != 32 {
		return nil, fmt.Errorf("the key file %s does not hold a 32-byte key", p)
	}
	return k, nil
}

// aead is AES-256-GCM with key.
func aead(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// Load reads and decrypts the record; ErrNoTokens when there is none.
func (s *Store) Load() (*Record, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoTokens
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", s.path, err)
	}
	key, err := s.keyOf(false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s exists, and the key file that encrypted it does not", ErrUnreadable, s.path)
	}
	if err != nil {
		return nil, err
	}
	g, err := aead(key)
	if err != nil {
		return nil, err
	}
	body, ok := strings.CutPrefix(string(data), magic)
	if !ok || len(body) < g.NonceSize() {
		return nil, fmt.Errorf("%s is not a token file this version reads", s.path)
	}
	plain, err := g.Open(nil, []byte(body[:g.NonceSize()]), []byte(body[g.NonceSize():]), s.binding)
	if err != nil {
		return nil, fmt.Errorf("%w: %s does not decrypt with this key for this server (another key, another server's file, or edited)", ErrUnreadable, s.path)
	}
	var r Record
	if err := json.Unmarshal(plain, &r); err != nil {
		return nil, fmt.Errorf("%s holds no token record", s.path)
	}
	return &r, nil
}

// Save encrypts and writes the record, replacing the file at once (a
// reader sees the old record or the new one), mode 0600.
func (s *Store) Save(r Record) error {
	key, err := s.keyOf(true)
	if err != nil {
		return err
	}
	g, err := aead(key)
	if err != nil {
		return err
	}
	plain, err := json.Marshal(r)
	if err != nil {
		return err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	out := append([]byte(magic), nonce...)
	out = g.Seal(out, nonce, plain, s.binding)
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("creating the token directory: %w", err)
	}
	f, err := os.CreateTemp(s.dir, ".token-*")
	if err != nil {
		return fmt.Errorf("writing the tokens: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(out)
	if serr := f.Sync(); werr == nil {
		werr = serr
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, s.path)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing the tokens to %s: %w", s.path, werr)
	}
	return nil
}
