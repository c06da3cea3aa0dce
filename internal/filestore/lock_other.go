//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filestore

import (
	"context"
	"runtime"

	"github.com/aidgen/aid/runtime/kind"
)

func lockSupported() error {
	return &kind.DeferredError{Feature: "run state in files on " + runtime.GOOS + " (no flock)"}
}

func lock(context.Context, string) (func(), error) { return nil, lockSupported() }
