package main

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
)

// originalJS starts the original kit's stand-in: the original package
// (glovebox-kit 0.5.0 on npm) is no longer published, so the round trips'
// "original" rows run the v1 box the TypeScript client's tests use, Node
// and the ws library as the original, written from its behavioural spec
// (client/typescript/test/v1server.mjs): the same frames, the same event
// loop, none of the original's agent or storage work, so its figures are
// a lower bound of the original's.
//
//go:embed original.mjs
var originalJS string

// v1Server is the stand-in's path, or "" when node or the TypeScript
// client's node_modules (npm ci in client/typescript) is missing.
func v1Server() string {
	if _, err := exec.LookPath("node"); err != nil {
		return ""
	}
	for _, dir := range []string{"client/typescript", "../../../client/typescript"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "ws")); err == nil {
			abs, _ := filepath.Abs(filepath.Join(dir, "test", "v1server.mjs"))
			return abs
		}
	}
	return ""
}

// startOriginal runs the original's stand-in in its own node process.
func startOriginal(v1server string) (*served, error) {
	cmd := exec.Command("node", "--input-type=module", "-e", originalJS)
	cmd.Env = append(os.Environ(), "KITBENCH_V1SERVER="+v1server)
	s, err := startProc(cmd)
	if err != nil {
		return nil, err
	}
	s.noHello = true
	return s, nil
}
