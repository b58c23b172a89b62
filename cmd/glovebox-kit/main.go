// Command glovebox-kit serves a box: the manifest's exec or ACP agent
// behind the Glovebox protocol. A Go agent has its own main that calls
// kit.Main (see examples/echo-agent).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/glovebox-dev/glovebox/kit"
	"github.com/glovebox-dev/glovebox/kit/agent/builtin"
	"github.com/glovebox-dev/glovebox/kit/sandbox"
)

func main() {
	sandbox.MaybeSupervise()
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return kit.Main(ctx, kit.Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv}, builtin.Resolve)
}
