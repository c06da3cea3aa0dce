//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filestore

import (
	"context"
	"runtime"

	"github.com/aidgen/aid/runtime/gateway"
)

func lockSupported() error {
	return &gateway.DeferredError{Feature: "run state in files on " + runtime.GOOS + " (no flock)"}
}

func lock(context.Context, string) (func(), error) { return nil, lockSupported() }
