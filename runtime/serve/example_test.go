package serve_test

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/aidgen/aid/runtime/serve"
)

// A generated main.go is one call: os.Exit(serve.Main(description(),
// serve.Options{...})). Run is the same with the process given; here a
// service without authentication is asked to listen on every interface,
// which it refuses at start, with exit code 1.
func ExampleRun() {
	dir, _ := os.MkdirTemp("", "serve-example")
	defer os.RemoveAll(dir)
	desc := desk(dir)
	desc.Retrievers, desc.Stores = nil, nil
	code := serve.Run(context.Background(), desc, serve.Options{}, serve.Process{
		Args:      []string{"-listen", "0.0.0.0:8080"},
		LookupEnv: func(string) (string, bool) { return "", false },
		Stderr:    io.Discard,
	})
	fmt.Println("exit code", code)
	// Output: exit code 1
}
