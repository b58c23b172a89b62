//go:build !linux

package sandbox

import (
	"errors"
	"os"
)

// OpenPTY is Linux's only: elsewhere a terminal cannot be opened.
func OpenPTY(cols, rows uint16) (master, slave *os.File, err error) {
	return nil, nil, errors.New("sandbox: terminals need Linux")
}

// ResizePTY is Linux's only.
func ResizePTY(master *os.File, cols, rows uint16) error {
	return errors.New("sandbox: terminals need Linux")
}
