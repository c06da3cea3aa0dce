// Command aidgen validates, builds and evaluates aid applications. The
// commands live in internal/cli so that tests drive the real CLI.
package main

import (
	"os"

	"github.com/aidgen/aid/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
