package openaicompat_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
)

// BenchmarkStream is a streamed chat completion of 20 text chunks, a
// finish and the usage from a loopback server, read to its end: what the
// provider's stream adds per call.
func BenchmarkStream(b *testing.B) {
	var body strings.Builder
	for range 20 {
		body.WriteString("data: " + chunk(large, textDelta("word "), "") + "\n\n")
	}
	body.WriteString("data: " + chunk(large, `{}`, "stop") + "\n\n")
	body.WriteString("data: " + usageChunk(large, 10, 20) + "\n\ndata: [DONE]\n\n")
	events := body.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, events)
	}))
	b.Cleanup(srv.Close)
	p, err := openaicompat.New(openaicompat.Config{BaseURL: srv.URL + "/v1"})
	if err != nil {
		b.Fatal(err)
	}
	spec := gateway.ModelSpec{ID: large, MaxOutputTokens: 50}
	req := ask("hi")
	b.ReportAllocs()
	for b.Loop() {
		s, err := p.Stream(b.Context(), spec, req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			d, err := s.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(d.Text)
		}
		_ = s.Close()
		if n != 100 {
			b.Fatalf("%d bytes of text", n)
		}
	}
}
