// Command democlient is the client of scripts/demo.sh: it waits until a
// generated service is ready, sends one chat completion with the openai-go
// client, and prints the answer as indented JSON. It is a Go program rather
// than curl so that the demo needs nothing but Go.
//
//	go run ./internal/tools/democlient -base http://127.0.0.1:8080 -message "I cannot log in"
//	go run ./internal/tools/democlient -free-port
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func main() {
	base := flag.String("base", "http://127.0.0.1:8080", "the service's base `URL`")
	model := flag.String("model", "", "the `agent` to ask; empty means the service's entry agent")
	user := flag.String("user", "demo-user", "the `user` id (agents with user memory need one)")
	message := flag.String("message", "I cannot log in", "the user `message`")
	wait := flag.Duration("wait", 30*time.Second, "how long to wait for /readyz")
	freePort := flag.Bool("free-port", false, "print a free loopback port and exit, for the script to start the service on")
	flag.Parse()
	if *freePort {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "democlient:", err)
			os.Exit(1)
		}
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
		l.Close()
		return
	}
	if err := run(*base, *model, *user, *message, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "democlient:", err)
		os.Exit(1)
	}
}

func run(base, model, user, message string, wait time.Duration) error {
	if err := waitReady(base, wait); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey(os.Getenv("AID_TOKEN")), option.WithMaxRetries(0))
	cc, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    model,
		User:     openai.String(user),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(message)},
	})
	if err != nil {
		return fmt.Errorf("chat completion: %w", err)
	}
	var v any
	if err := json.Unmarshal([]byte(cc.RawJSON()), &v); err != nil {
		return fmt.Errorf("decoding the answer: %w", err)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

// waitReady polls /readyz until it answers 200 or wait passes.
func waitReady(base string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/readyz not ready after %s: %w", base, wait, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
