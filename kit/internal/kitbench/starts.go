package main

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"time"
)

// starts times n starts of the kit to /health answering, with the
// manifest's defaults and with the sandbox off, and as many of a minimal
// Go HTTP server (this binary in its http role), interleaved. As root,
// where the kit separates its privileges (a root monitor starting an
// unprivileged front), also in one process (GLOVEBOX_PRIVSEP=off), so
// that the split's cost shows.
func starts(kitPath string, n int) ([]row, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	type variant struct {
		manifest string
		env      []string
		to       *[]time.Duration
	}
	var ks, offs, ones, fs []time.Duration
	vs := []variant{{`{"name":"bench"}`, nil, &ks}, {`{"name":"bench","sandbox":{"enabled":false}}`, nil, &offs}}
	root := os.Geteuid() == 0
	if root {
		vs = append(vs, variant{`{"name":"bench"}`, []string{"GLOVEBOX_PRIVSEP=off"}, &ones})
	}
	for range n {
		for _, v := range vs {
			k, d, err := startWith(kitPath, v.manifest, v.env...)
			if err != nil {
				return nil, err
			}
			*v.to = append(*v.to, d)
			k.stop()
		}
		d, err := startFloor(self)
		if err != nil {
			return nil, fmt.Errorf("minimal Go HTTP server: %w", err)
		}
		fs = append(fs, d)
	}
	rows := []row{startRow("kit process start to /health answering", ks, "the last of these rows")}
	if root {
		rows = append(rows, startRow("the same, in one process (GLOVEBOX_PRIVSEP=off: no front to start)", ones, "the last of these rows"))
	}
	return append(rows,
		startRow("the same, sandbox off", offs, "the next row"),
		startRow("minimal Go HTTP server (kitbench's http role) start to /health", fs, "the floor")), nil
}

func startRow(measure string, ds []time.Duration, floor string) row {
	r := durRow(measure, ds, floor)
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	r.spread = "min " + dur(s[0]) + ", " + r.spread
	return r
}

// startFloor times self in its http role from exec to /health answering.
func startFloor(self string) (time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self)
	cmd.Env = []string{roleEnv + "=http", "GLOVEBOX_PORT=" + strconv.Itoa(port)}
	cmd.Stderr = os.Stderr
	k := &kitProc{cmd: cmd, port: port}
	d, err := waitHealth(k)
	if err == nil {
		k.stop()
	}
	return d, err
}
