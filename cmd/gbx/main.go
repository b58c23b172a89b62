// Command gbx is the Glovebox command line: scaffold, generate, run and
// talk to boxes. Its logic lives in internal/cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/glovebox-dev/glovebox/internal/cli"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

func main() {
	sandbox.MaybeSupervise() // gbx dev serves boxes: it is their sandbox's supervisor
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gbx: working directory:", err)
		return 1
	}
	return cli.Run(ctx, cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Dir: dir}, os.Args[1:])
}
