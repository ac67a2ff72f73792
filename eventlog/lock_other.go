//go:build !unix

package eventlog

import (
	"fmt"
	"os"
)

// lockDir creates the lock file; without flock(2) it cannot exclude other
// processes.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	return f, nil
}
