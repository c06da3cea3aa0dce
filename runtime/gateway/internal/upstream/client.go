package upstream

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aidgen/aid/runtime/kind"
)

// APIKey reads the API key from the environment variable name through
// lookup, trimmed. An empty name means the service needs no key, and gives
// none; a variable that is not set, or holds only white space, is an error
// naming the variable and never its value.
func APIKey(lookup func(string) (string, bool), name string) (string, error) {
	if name == "" {
		return "", nil
	}
	v, ok := lookup(name)
	if !ok || strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("environment variable %s, which should hold the API key, is not set", name)
	}
	return strings.TrimSpace(v), nil
}

// SameOrigin returns a copy of hc (nil means a client on
// kind.DefaultTransport, which keeps idle connections for concurrent
// calls) that follows a redirect only within base's
// origin: a redirect elsewhere is answered as the redirect itself, so that
// the key in the request's headers does not follow it there.
func SameOrigin(hc *http.Client, base *url.URL) *http.Client {
	c := *kind.HTTPClient(hc)
	c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 10 || r.URL.Scheme != base.Scheme || r.URL.Host != base.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}
	return &c
}
