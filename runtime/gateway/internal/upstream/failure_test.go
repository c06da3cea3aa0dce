package upstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
)

func TestClassification(t *testing.T) {
	for code, want := range map[int]bool{400: false, 401: false, 403: false, 404: false, 408: true, 409: true, 429: true, 500: true, 503: true, 529: true} {
		if RetryableStatus(code) != want {
			t.Errorf("RetryableStatus(%d) = %v", code, !want)
		}
	}
	var syntax *json.SyntaxError
	err := json.Unmarshal([]byte(`{"a":`), &struct{}{})
	if !errors.As(err, &syntax) || !Malformed(fmt.Errorf("decoding: %w", err)) || !Malformed(errors.New("error parsing response json: unexpected EOF")) {
		t.Errorf("a body that is not JSON is not malformed: %v", err)
	}
	if Malformed(io.ErrUnexpectedEOF) || !Transient(fmt.Errorf("read: %w", io.ErrUnexpectedEOF)) || !Transient(syscall.ECONNRESET) || Transient(errors.New("bad")) {
		t.Error("a connection cut short is transient, nothing else")
	}
}

func TestAPIKey(t *testing.T) {
	env := map[string]string{"SET": " sk-1 \n", "BLANK": " "}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if k, err := APIKey(lookup, "SET"); k != "sk-1" || err != nil {
		t.Errorf("SET: %q, %v", k, err)
	}
	if k, err := APIKey(lookup, ""); k != "" || err != nil {
		t.Errorf("no variable: %q, %v", k, err)
	}
	for _, name := range []string{"BLANK", "UNSET"} {
		if _, err := APIKey(lookup, name); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v, want an error naming it", name, err)
		}
	}
}
