//go:build !linux

package kit

import (
	"context"
	"net"
	"os"
)

// front is a privilege-separated kit's front: Linux only.
type front struct {
	monitor  *os.File
	ln       net.Listener
	manifest []byte
}

// frontOf is nil: privilege separation is Linux only.
func frontOf(Env) (*front, error) { return nil, nil }

// runMonitor does nothing: privilege separation is Linux only.
func runMonitor(context.Context, Env, *flags) (bool, error) { return false, nil }
