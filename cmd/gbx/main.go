// Command gbx is the Glovebox command line: scaffold, generate, run and
// talk to boxes. Its logic lives in internal/cli.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/glovebox-dev/glovebox/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Run(ctx, cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	stop()
	var exit *cli.ExitError
	switch {
	case err == nil:
		return
	case errors.As(err, &exit):
		os.Exit(exit.Code)
	case errors.Is(err, cli.ErrUsage):
		fmt.Fprintln(os.Stderr, "gbx:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "gbx:", err)
		os.Exit(1)
	}
}
