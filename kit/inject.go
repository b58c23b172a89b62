package kit

import (
	"encoding/json"
	"os"
	"sort"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/agent"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Directives a user may put in a prompt, each on a line of its own: the
// line's first word is the directive and the rest of the line its
// argument. The kit removes directive lines from the text the agent gets
// and keeps the rest of the message.
const (
	dirOutput         = "/output"          // hook: return a file with the outputs
	dirClearWorkspace = "/clear-workspace" // hook: empty the session's work directory
	dirEnvironment    = "/environment"     // skill: the box's environment
	dirWorkspace      = "/workspace"       // skill: the session's files
)

type directive struct {
	name string
	args string
}

// parseDirectives splits a prompt into its text without directive lines
// and the directives, in order. A text that is only white space once the
// directives are gone becomes "".
func parseDirectives(text string) (string, []directive) {
	if !strings.Contains(text, "/") {
		return text, nil
	}
	var ds []directive
	var kept []string
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " \t\r")
		word, rest := trimmed, ""
		if i := strings.IndexAny(trimmed, " \t"); i >= 0 {
			word, rest = trimmed[:i], trimmed[i+1:]
		}
		word = strings.TrimRight(word, "\r")
		switch word {
		case dirOutput, dirClearWorkspace, dirEnvironment, dirWorkspace:
			ds = append(ds, directive{name: word, args: strings.TrimSpace(rest)})
		default:
			kept = append(kept, line)
		}
	}
	if len(ds) == 0 {
		return text, nil
	}
	out := strings.Join(kept, "\n")
	if strings.TrimSpace(out) == "" {
		out = ""
	}
	return out, ds
}

// preamble is the environment preamble (v1's text, with the session's real
// directories and without v1's fixed last line, which named /input, /work
// and /output whatever the real paths were).
func preamble(m *protocol.Manifest, d agent.Dirs, proxied bool) string {
	lines := []string{"[Glovebox environment]"}
	if d.Work != "" {
		lines = append(lines, "Working directory: "+d.Work)
	}
	if d.Input != "" {
		lines = append(lines, "Inputs (read-only): "+d.Input)
	}
	if d.Output != "" {
		lines = append(lines, "Outputs: "+d.Output+" \u2014 write your results here")
	}
	tools := append(append([]string(nil), m.Packages.Apt...), m.Packages.Nix...)
	if len(tools) > 0 {
		lines = append(lines, "Available tools: "+strings.Join(tools, ", "))
	}
	if m.Limits.Timeout != "" {
		lines = append(lines, "Timeout: "+m.Limits.Timeout)
	}
	if m.Limits.Memory != "" {
		lines = append(lines, "Memory limit: "+m.Limits.Memory)
	}
	if l := egressPreamble(m, proxied); l != "" {
		lines = append(lines, l)
	}
	return strings.Join(lines, "\n")
}

// sessionFS is the manifest's fs with the session's real directories.
func (ss *session) sessionFS() map[string]protocol.Mount {
	fs := make(map[string]protocol.Mount, len(ss.srv.man.FS))
	d := ss.workspace.info.Dirs
	for k, mt := range ss.srv.man.FS {
		p := ss.srv.mounts[k]
		switch k {
		case protocol.MountWork:
			p = d.Work
		case protocol.MountInput:
			p = d.Input
		case protocol.MountOutput:
			p = d.Output
		}
		fs[k] = protocol.Mount{Path: p, Writable: mt.Writable}
	}
	return fs
}

// skill returns a skill's content: 2-space indented JSON, as v1's.
func (ss *session) skill(name string) string {
	var v any
	switch name {
	case "environment":
		m := ss.srv.man
		v = struct {
			Name     string                    `json:"name"`
			Version  string                    `json:"version"`
			Base     string                    `json:"base"`
			FS       map[string]protocol.Mount `json:"fs"`
			Packages protocol.Packages         `json:"packages"`
			Limits   protocol.Limits           `json:"limits"`
		}{m.Name, m.Version, m.Base, ss.sessionFS(), m.Packages, m.Limits}
	case "workspace":
		list := map[string][]string{}
		for k, mt := range ss.sessionFS() {
			names := []string{}
			if entries, err := os.ReadDir(mt.Path); err == nil {
				for _, e := range entries {
					names = append(names, e.Name())
				}
			}
			sort.Strings(names)
			list[k] = names
		}
		v = list
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
