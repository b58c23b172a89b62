package generator

import (
	"encoding/json"
)

// lockFile is the flake.lock (version 7) of the generated flake. nixpkgs is
// locked to the pin; glovebox to the release pin when there is one, else to
// what a previous lock held, else it is left for the first networked lock.
// A base from another flake is kept from the previous lock when it holds
// one, else it is left for the first networked lock too.
func lockFile(opts Options, keptLabel string, kept map[string]json.RawMessage, baseLabel string, baseNodes map[string]json.RawMessage) map[string]any {
	nodes := map[string]any{"nixpkgs": opts.Nixpkgs.lockNode()}
	rootInputs := map[string]any{"nixpkgs": "nixpkgs"}
	switch {
	case opts.Glovebox != nil:
		g := opts.Glovebox.lockNode()
		g["inputs"] = map[string]any{"nixpkgs": []string{"nixpkgs"}}
		nodes["glovebox"] = g
		rootInputs["glovebox"] = "glovebox"
	case kept != nil:
		for label, n := range kept {
			nodes[label] = n
		}
		rootInputs["glovebox"] = keptLabel
	}
	if baseNodes != nil {
		for label, n := range baseNodes {
			if _, clash := nodes[label]; !clash {
				nodes[label] = n
			}
		}
		rootInputs["base"] = baseLabel
	}
	nodes["root"] = map[string]any{"inputs": rootInputs}
	return map[string]any{"nodes": nodes, "root": "root", "version": 7}
}

// keptInput returns the label of the node a previous lock gives the root
// input named input, and the nodes it reaches, by label. It returns no
// nodes when the lock is absent, unreadable, of another version, or its
// nodes would clash with ours.
func keptInput(prev []byte, input string) (string, map[string]json.RawMessage) {
	if len(prev) == 0 {
		return "", nil
	}
	var l struct {
		Nodes   map[string]json.RawMessage `json:"nodes"`
		Root    string                     `json:"root"`
		Version int                        `json:"version"`
	}
	if json.Unmarshal(prev, &l) != nil || l.Version != 7 {
		return "", nil
	}
	inputsOf := func(label string) map[string]json.RawMessage {
		var n struct {
			Inputs map[string]json.RawMessage `json:"inputs"`
		}
		if json.Unmarshal(l.Nodes[label], &n) != nil {
			return nil
		}
		return n.Inputs
	}
	var start string
	if json.Unmarshal(inputsOf(l.Root)[input], &start) != nil || start == "" {
		return "", nil // absent, or a follows path
	}
	kept := map[string]json.RawMessage{}
	queue := []string{start}
	for len(queue) > 0 {
		label := queue[0]
		queue = queue[1:]
		if _, seen := kept[label]; seen {
			continue
		}
		n, ok := l.Nodes[label]
		if !ok || label == "nixpkgs" || label == "root" || label == l.Root {
			return "", nil
		}
		kept[label] = n
		for _, in := range inputsOf(label) {
			var next string
			if json.Unmarshal(in, &next) == nil { // a label; follows paths are arrays
				queue = append(queue, next)
			}
		}
	}
	return start, kept
}
