package anthropic

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/aidgen/aid/runtime/gateway/internal/upstream"
)

// The bounds on what is read from the service.
const (
	// maxAnswerBody bounds a message answer: a model's answer is bounded
	// by its output tokens (128k tokens are about 512 KB of text), so an
	// answer this long is an upstream gone wrong, not one to hold in
	// memory.
	maxAnswerBody = 8 << 20
	// maxEvent bounds one event of a stream: the service streams deltas of
	// a few tokens each, so an event this long is an upstream gone wrong.
	// A stream as a whole is bounded by its events and the attempt's
	// timeout between them.
	maxEvent = 1 << 20
)

// middleware is the client's middleware. It hands the SDK an error
// answer's first upstream.MaxErrorBody bytes, recorded in the request's
// upstream.Exchange, and bounds a successful answer: a JSON body to
// maxAnswerBody bytes, an event stream to maxEvent bytes per event.
func middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil {
		return res, err
	}
	x := upstream.ExchangeOf(req)
	if res.StatusCode >= 400 {
		upstream.ReadErrorAnswer(res, x)
		return res, nil
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "text/event-stream" {
		res.Body = &eventBound{rc: res.Body, x: x}
	} else {
		res.Body = &sizeBound{rc: res.Body, left: maxAnswerBody, x: x}
	}
	return res, nil
}

// errTooLong is the read error of an answer that broke its bound; the
// exchange holds the error classify reports.
var errTooLong = errors.New("answer too long")

// sizeBound fails a body's read once it has given more than left bytes.
type sizeBound struct {
	rc   io.ReadCloser
	left int64
	x    *upstream.Exchange
}

func (b *sizeBound) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLong
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		b.x.TooLong = fmt.Errorf("answer is longer than %d bytes", maxAnswerBody)
		return n, errTooLong
	}
	return n, err
}

func (b *sizeBound) Close() error { return b.rc.Close() }

// eventBound fails a stream's read once an event (the bytes between two
// blank lines) runs past maxEvent bytes.
type eventBound struct {
	rc io.ReadCloser
	x  *upstream.Exchange
	// run counts the bytes since the last blank line; nl says whether the
	// last byte (a carriage return aside) ended a line.
	run int
	nl  bool
}

func (b *eventBound) Read(p []byte) (int, error) {
	if b.x.TooLong != nil {
		return 0, errTooLong
	}
	n, err := b.rc.Read(p)
	for _, c := range p[:n] {
		switch c {
		case '\r':
			continue
		case '\n':
			if b.nl {
				b.run = 0
			}
			b.nl = true
		default:
			b.nl = false
		}
		if b.run++; b.run > maxEvent {
			b.x.TooLong = fmt.Errorf("an event of the stream is longer than %d bytes", maxEvent)
			return 0, errTooLong
		}
	}
	return n, err
}

func (b *eventBound) Close() error { return b.rc.Close() }
