package main

import (
	"context"
	"strconv"
	"time"

	"github.com/glovebox-dev/glovebox/internal/sessionbench"
)

// firstCommand times, n times each, a bare fork/exec of /bin/sh -c 'echo
// hi' to its first byte of output (the floor), then a new session dialled
// to a kit and prompted with echo hi, to the prompt's first event, with
// every sandbox layer the machine allows and with the sandbox off.
func firstCommand(kitPath string, n, warm int) ([]row, error) {
	agentJSON := ""
	if warm >= 0 {
		agentJSON = `,"agent":{"type":"exec","warm":` + strconv.Itoa(warm) + `}`
	}
	var floor []time.Duration
	for i := 0; i < n; i++ {
		d, err := sessionbench.Floor()
		if err != nil {
			return nil, err
		}
		floor = append(floor, d)
	}
	rows := []row{durRow("fork/exec of /bin/sh -c 'echo hi' to its output", floor, "the floor of the next two")}
	for _, v := range []struct{ name, manifest string }{
		{"every layer", `{"name":"bench"` + agentJSON + `}`},
		{"sandbox off", `{"name":"bench","sandbox":{"enabled":false}` + agentJSON + `}`},
	} {
		k, _, err := startWith(kitPath, v.manifest)
		if err != nil {
			return nil, err
		}
		layers, _ := isolation(k)
		var ds []time.Duration
		for i := 0; i < n; i++ {
			d, err := sessionbench.FirstEvent(context.Background(), "ws://127.0.0.1:"+strconv.Itoa(k.port)+"/", k.key)
			if err != nil {
				k.stop()
				return nil, err
			}
			ds = append(ds, d)
		}
		k.stop()
		rows = append(rows, durRow("new session to the first event of echo hi, "+v.name, ds, "fork/exec floor; layers: "+layers))
	}
	return rows, nil
}
