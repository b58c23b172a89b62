//go:build !linux

package kit

import (
	"errors"
	"io"
)

// needsInit is false off Linux: boxes are Linux containers.
func needsInit() bool { return false }

func runInit([]string, io.Writer) error { return errors.New("init: only on linux") }
