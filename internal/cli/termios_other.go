//go:build !linux && !darwin

package cli

import (
	"errors"
	"os"
)

// Elsewhere gbx shell runs without raw mode or resizes.

func termSize(*os.File) (cols, rows int) { return 0, 0 }
func notifyResize(chan<- os.Signal)      {}
func makeRaw(*os.File) (func(), error) {
	return nil, errors.New("raw mode is for Linux and macOS")
}
