package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// goAgentBox is a Go agent's own kit binary, built from its main package
// with `go build` and run as a process, as the image runs it.
type goAgentBox struct {
	URL  string
	cmd  *exec.Cmd
	done chan error
}

// startGoAgent builds main (a package path relative to dir, the box's Go
// module) into the state directory and runs it with the manifest, key,
// root and address a deployed box gets from its environment. It returns
// once the box answers /health.
func startGoAgent(ctx context.Context, stdio IO, dir, main, state, addr, key string, m *protocol.Manifest) (*goAgentBox, error) {
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	bin := filepath.Join(state, "glovebox-agent")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, main)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the Go agent %s in %s: %w\n%s", main, dir, err, out)
	}
	buildSupervisor(ctx, stdio, dir, state)
	data, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	manifest := filepath.Join(state, "glovebox.json")
	if err := os.WriteFile(manifest, data, 0o600); err != nil {
		return nil, fmt.Errorf("write manifest: %w", err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %w", addr, err)
	}
	if port == "0" { // the agent's kit needs a port it can be told
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("pick a port: %w", err)
		}
		port = fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		addr = net.JoinHostPort(host, port)
	}
	root := filepath.Join(state, "root")
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stdio.Stderr, stdio.Stderr
	cmd.Env = append(os.Environ(),
		"GLOVEBOX_MANIFEST="+manifest, "GLOVEBOX_KEY="+key, "GLOVEBOX_ROOT="+root,
		"GLOVEBOX_PORT="+port, "GLOVEBOX_INIT=off",
		// As the manifest says (sandbox.allow_degraded): on the
		// developer's machine the box serves with the layers it allows.
		"GLOVEBOX_SANDBOX_ALLOW_DEGRADED=1")
	if pub := stdio.Getenv("GLOVEBOX_PUBLIC_URL"); pub != "" {
		cmd.Env = append(cmd.Env, "GLOVEBOX_PUBLIC_URL="+pub)
	} else {
		cmd.Env = append(cmd.Env, "GLOVEBOX_PUBLIC_URL=http://"+addr)
	}
	if host != "127.0.0.1" && host != "localhost" && host != "" {
		return nil, fmt.Errorf("--addr %q: a Go agent's dev box listens on 127.0.0.1 only", addr)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the Go agent: %w", err)
	}
	b := &goAgentBox{URL: "ws://" + addr + "/", cmd: cmd, done: make(chan error, 1)}
	go func() { b.done <- cmd.Wait() }()
	// Ready when /health answers, or failed when the process exits.
	wait, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(wait, http.MethodGet, "http://"+addr+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b, nil
			}
		}
		select {
		case err := <-b.done:
			return nil, fmt.Errorf("the Go agent exited before it served: %v", err)
		case <-wait.Done():
			b.Close()
			return nil, fmt.Errorf("the Go agent did not answer http://%s/health within 60s", addr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close stops the agent with SIGTERM (SIGKILL after 10s) and waits.
func (b *goAgentBox) Close() error {
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-b.done:
		var exit *exec.ExitError
		if errors.As(err, &exit) && strings.Contains(exit.String(), "signal") {
			return nil
		}
		return err
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
		return errors.New("the Go agent did not stop within 10s of SIGTERM: killed")
	}
}

// buildSupervisor builds glovebox-sandbox beside the agent, from the
// glovebox version the box's module requires, as the images install it
// beside the kit: the agent's kit then starts its sessions' supervisors
// from it. Where it cannot be built (a module that vendors its
// dependencies, a glovebox without it), the kit re-executes itself as
// supervisor, as it always can; gbx says so once.
func buildSupervisor(ctx context.Context, stdio IO, dir, state string) {
	bin := filepath.Join(state, sandbox.SupervisorName)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/glovebox-dev/glovebox/cmd/"+sandbox.SupervisorName)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		os.Remove(bin) // never a stale one of another version
		fmt.Fprintf(stdio.Stderr, "gbx dev: %s not built beside the agent (%v: %s); the agent's kit serves as its own sandbox supervisor\n", sandbox.SupervisorName, err, strings.TrimSpace(string(out)))
	}
}
