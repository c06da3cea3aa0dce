package service

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestWriteJSONLength checks that an answer goes with its length, however
// long, that a buffer is not shared between answers, and that a value JSON
// cannot hold is a whole 500 answer rather than half a 200.
func TestWriteJSONLength(t *testing.T) {
	long := map[string]string{"text": strings.Repeat("é", 100_000)}
	for _, v := range []any{map[string]int{"n": 1}, long, map[string]int{"m": 2}} {
		rec := httptest.NewRecorder()
		writeJSON(rec, http.StatusOK, v)
		want, _ := json.Marshal(v)
		body := rec.Body.String()
		if rec.Code != 200 || strings.TrimSuffix(body, "\n") != string(want) || rec.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Fatalf("%d, Content-Length %q for %d bytes, body %.80q", rec.Code, rec.Header().Get("Content-Length"), len(body), body)
		}
	}
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "req_1")
	writeJSON(rec, http.StatusOK, map[string]float64{"cost": math.NaN()})
	var e struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Code != CodeServer || e.Error.Message != "internal error (request req_1)" ||
		rec.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
		t.Fatalf("NaN: %d %q", rec.Code, rec.Body)
	}
}
