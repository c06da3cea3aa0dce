package oauth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestSourceRefreshesBeforeExpiry: a token is kept until a margin before
// its expiry (a third of its life for a short one, a minute at most), and
// replaced then, before the server would refuse it.
func TestSourceRefreshesBeforeExpiry(t *testing.T) {
	for _, tc := range []struct {
		life, keep, replace time.Duration
	}{
		{life: 30 * time.Second, keep: 19 * time.Second, replace: 21 * time.Second},      // margin 10s
		{life: time.Hour, keep: 58 * time.Minute, replace: 59*time.Minute + time.Second}, // margin 1m
	} {
		t.Run(tc.life.String(), func(t *testing.T) {
			c := &clock{now: time.Unix(1e9, 0)}
			var n atomic.Int32
			src := NewSource(func(ctx context.Context, cur *oauth2.Token) (*oauth2.Token, error) {
				i := n.Add(1)
				return &oauth2.Token{AccessToken: fmt.Sprintf("access-%d", i), Expiry: c.Now().Add(tc.life)}, nil
			}, SourceOptions{Now: c.Now})
			first, err := src.Token(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			c.advance(tc.keep)
			if tok, _ := src.Token(t.Context()); tok.AccessToken != first.AccessToken {
				t.Errorf("replaced at %v of %v", tc.keep, tc.life)
			}
			c.advance(tc.replace - tc.keep)
			if tok, _ := src.Token(t.Context()); tok.AccessToken == first.AccessToken {
				t.Errorf("still %s at %v of %v", tok.AccessToken, tc.replace, tc.life)
			}
		})
	}
}

// TestSourceOneFetch: callers that find the token stale at once share one
// fetch, which is told the refresh token to use, and a server that does
// not rotate it keeps the old one.
func TestSourceOneFetch(t *testing.T) {
	c := &clock{now: time.Unix(1e9, 0)}
	var fetches atomic.Int32
	release := make(chan struct{})
	src := NewSource(func(ctx context.Context, cur *oauth2.Token) (*oauth2.Token, error) {
		fetches.Add(1)
		if cur == nil || cur.RefreshToken != "rt-1" {
			return nil, fmt.Errorf("refreshed with %+v", cur)
		}
		<-release
		return &oauth2.Token{AccessToken: "access-2", Expiry: c.Now().Add(time.Hour)}, nil
	}, SourceOptions{Now: c.Now, Initial: &oauth2.Token{AccessToken: "access-1", RefreshToken: "rt-1", Expiry: c.Now().Add(-time.Second)}})
	var wg sync.WaitGroup
	got := make(chan string, 50)
	for range 50 {
		wg.Go(func() {
			tok, err := src.Token(t.Context())
			if err != nil {
				t.Error(err)
				return
			}
			got <- tok.AccessToken + "/" + tok.RefreshToken
		})
	}
	time.Sleep(50 * time.Millisecond) // let the callers pile up behind the fetch
	close(release)
	wg.Wait()
	close(got)
	for g := range got {
		if g != "access-2/rt-1" {
			t.Errorf("a caller got %s", g)
		}
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches for 50 callers, want 1", n)
	}
}

// TestSourceInvalidate: a token the server refused is replaced on the next
// call; one already replaced is not replaced again; a caller whose context
// ends while another fetches returns.
func TestSourceInvalidate(t *testing.T) {
	var n atomic.Int32
	block := make(chan struct{})
	src := NewSource(func(ctx context.Context, cur *oauth2.Token) (*oauth2.Token, error) {
		i := n.Add(1)
		if i == 3 {
			<-block
		}
		return &oauth2.Token{AccessToken: fmt.Sprintf("access-%d", i)}, nil
	}, SourceOptions{})
	tok, _ := src.Token(t.Context())
	src.Invalidate("access-0") // not the current one
	if again, _ := src.Token(t.Context()); again.AccessToken != tok.AccessToken {
		t.Errorf("invalidating another token replaced %s", tok.AccessToken)
	}
	src.Invalidate(tok.AccessToken)
	if again, _ := src.Token(t.Context()); again.AccessToken != "access-2" {
		t.Errorf("after an invalidation: %s", again.AccessToken)
	}
	src.Invalidate("access-2")
	go func() { _, _ = src.Token(context.Background()) }() // blocks in the third fetch
	for n.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := src.Token(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a caller waiting on another's fetch past its deadline: %v", err)
	}
	close(block)
}
