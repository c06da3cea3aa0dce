package kind

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// EnvStateDir names the environment variable that says where aid keeps
// what it stores on the local disk: the runs of `aidgen run` for an
// application whose state is in memory, and the OAuth tokens of MCP
// servers that `aidgen mcp login` obtained.
const EnvStateDir = "AID_STATE_DIR"

// StateHome is the user's directory for state, under which aid keeps what
// it stores when EnvStateDir is not set: $XDG_STATE_HOME when absolute,
// else ~/.local/state, and the user cache directory on the systems XDG
// does not apply to. lookup reads the environment; nil means os.LookupEnv.
func StateHome(lookup func(string) (string, bool)) (string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if base, _ := lookup("XDG_STATE_HOME"); filepath.IsAbs(base) { // the XDG spec ignores a relative value
		return base, nil
	}
	switch runtime.GOOS {
	case "darwin", "ios", "windows", "plan9":
		dir, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no directory for state: %w", err)
		}
		return dir, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no directory for state: %w", err)
	}
	if home == "" {
		return "", errors.New("no directory for state: no home directory")
	}
	return filepath.Join(home, ".local", "state"), nil
}
