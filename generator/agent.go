package generator

import (
	"regexp"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

func (d *doc) agent(path string, v any, c *Config) {
	m, ok := d.table(path, v, "type", "command", "env", "main", "vendor_hash", "warm")
	if !ok {
		return
	}
	a := protocol.AgentSpec{Type: protocol.AgentExec}
	if x, ok := m["type"]; ok {
		if s, ok := d.str(path+".type", x); ok {
			a.Type = s
		}
	}
	switch a.Type {
	case protocol.AgentExec, protocol.AgentGo, protocol.AgentACP:
	default:
		d.errorf(path+".type", "%q is not an agent type: use exec, acp or go", a.Type)
	}
	if x, ok := m["command"]; ok {
		if a.Type != protocol.AgentACP {
			d.errorf(path+".command", "command is only for type = \"acp\"")
		} else if cmd, ok := d.strList(path+".command", x); ok {
			a.Command = cmd
		}
	}
	if a.Type == protocol.AgentACP && (len(a.Command) == 0 || strings.TrimSpace(a.Command[0]) == "") {
		if _, given := m["command"]; !given || len(a.Command) == 0 {
			d.errorf(path, "type = \"acp\" needs a command, e.g. command = [\"npx\", \"my-acp-agent\"]")
		} else {
			d.errorf(path+".command", "the program name is empty")
		}
	}
	if x, ok := m["env"]; ok {
		if a.Type != protocol.AgentACP {
			d.errorf(path+".env", "env is only for type = \"acp\"")
		} else if env, ok := d.strMap(path+".env", x); ok {
			for _, k := range sortedKeys(env) {
				if !envNameRE.MatchString(k) {
					d.errorf(joinPath(path+".env", []string{k}), "%q is not a valid variable name", k)
				}
			}
			if len(env) > 0 {
				a.Env = env
			}
		}
	}
	if x, ok := m["main"]; ok {
		if a.Type != protocol.AgentGo {
			d.errorf(path+".main", "main is only for type = \"go\"")
		} else if s, ok := d.str(path+".main", x); ok {
			if !goMainRE.MatchString(s) || strings.Contains(s, "..") {
				d.errorf(path+".main", "%q is not a main package inside the box directory: write it as \"./cmd/myagent\" (letters, digits, . _ - and /)", s)
			}
			c.AgentMain = s
		}
	} else if a.Type == protocol.AgentGo {
		d.errorf(path, "type = \"go\" needs main, the Go main package that calls kit.Main, e.g. main = \"./cmd/myagent\" (the box directory holds its Go module)")
	}
	if x, ok := m["vendor_hash"]; ok {
		if a.Type != protocol.AgentGo {
			d.errorf(path+".vendor_hash", "vendor_hash is only for type = \"go\"")
		} else if s, ok := d.str(path+".vendor_hash", x); ok {
			if !narHashRE.MatchString(s) {
				d.errorf(path+".vendor_hash", "%q is not an SRI sha256 hash such as \"sha256-...=\": use the one Nix prints on the first build", s)
			}
			c.AgentVendorHash = s
		}
	}
	if x, ok := m["warm"]; ok {
		if n, ok := d.integer(path+".warm", x); ok {
			if n < 0 || n > protocol.MaxWarm {
				d.errorf(path+".warm", "%d warm sessions: use 0 (off) to %d", n, protocol.MaxWarm)
			} else {
				a.Warm = &n
			}
		}
	}
	c.Agent = a
}

// goMainRE is a main package path relative to the box directory.
var goMainRE = regexp.MustCompile(`^\./[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)
