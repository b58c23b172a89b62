package generator

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// A Preset is what `[agent] preset = "NAME"` brings to a box: an ACP
// agent's package (an npm lock entry, or a nixpkgs attribute where that is
// the agent's form), its command, the API key it needs declared as a
// secret and brokered to its API host (the agent sees a placeholder), an
// egress policy that allows that host and nothing else, and limits. It is
// TOML under the box's own: every key the box's file sets wins, table by
// table ([agent] command, [env.ANTHROPIC_API_KEY], [network] allow, ...),
// and the box's [packages] npm and nix are added to the preset's (an npm
// package of the same name replaces the preset's, to pin another
// version).
type Preset struct {
	Name string
	// Description is one line for gbx init and the docs.
	Description string
	// Secret is the API key the agent needs, brokered to Host.
	Secret, Host string
	// KeyName and Console describe the key for its description ("Anthropic
	// API key", where it is made); Header is the request header the
	// egress proxy puts it in (empty: the inject default).
	KeyName, Console, Header string
	// Bin is the program the agent's command runs.
	Bin string
	// TOML is the preset's [packages] and [agent]: the rest (the key
	// declared and brokered, an egress policy that allows Host only, the
	// limits) is the same for every preset and made by toml.
	TOML string
}

// presetLimits are every preset's limits: a coding agent and its tools
// need room, and a conversation runs long.
const presetLimits = `
[limits]
memory = "2Gi"
timeout = "30m"
`

// toml is the preset's whole part of glovebox.toml.
func (p Preset) toml() string {
	header := ""
	if p.Header != "" {
		header = fmt.Sprintf(", header = %q", p.Header)
	}
	return p.TOML + fmt.Sprintf(`
[env.%s]
required = true
secret = true
description = "%s (%s); the agent sees a placeholder, the egress proxy sends the key to %s only"
inject = { hosts = [%q]%s }

[network]
default = "deny"
allow = ["%s:443"]
`, p.Secret, p.KeyName, p.Console, p.Host, p.Host, header, p.Host) + presetLimits
}

// The adapters' versions are those the ACP tests box offline
// (kit/agent/acp/testdata/realagents): bump them together.
var presetList = []Preset{
	{
		Name:        "claude-code",
		Description: "Claude Code through Zed's ACP adapter (npm @zed-industries/claude-code-acp)",
		Secret:      "ANTHROPIC_API_KEY", Host: "api.anthropic.com", Bin: "claude-code-acp",
		TOML: `
[packages]
npm = ["@zed-industries/claude-code-acp@0.16.2"]

[agent]
type = "acp"
command = ["claude-code-acp"]
env = { CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = "1", DISABLE_AUTOUPDATER = "1" }

`,
		KeyName: "Anthropic API key", Console: "console.anthropic.com", Header: "x-api-key",
	},
	{
		Name:        "codex",
		Description: "OpenAI Codex through Zed's ACP adapter (npm @zed-industries/codex-acp)",
		Secret:      "OPENAI_API_KEY", Host: "api.openai.com", Bin: "codex-acp",
		TOML: `
[packages]
npm = ["@zed-industries/codex-acp@0.16.0"]

[agent]
type = "acp"
command = ["codex-acp"]

`,
		KeyName: "OpenAI API key", Console: "platform.openai.com", Header: "",
	},
	{
		Name:        "gemini",
		Description: "Gemini CLI in its ACP mode (npm @google/gemini-cli)",
		Secret:      "GEMINI_API_KEY", Host: "generativelanguage.googleapis.com", Bin: "gemini",
		TOML: `
[packages]
npm = ["@google/gemini-cli@0.61.0"]

[agent]
type = "acp"
command = ["gemini", "--experimental-acp"]

`,
		KeyName: "Gemini API key", Console: "aistudio.google.com", Header: "x-goog-api-key",
	},
	{
		Name:        "opencode",
		Description: "OpenCode in its ACP mode with Anthropic models (npm opencode-ai)",
		Secret:      "ANTHROPIC_API_KEY", Host: "api.anthropic.com", Bin: "opencode",
		TOML: `
[packages]
npm = ["opencode-ai@1.18.33"]

[agent]
type = "acp"
command = ["opencode", "acp"]
env = { OPENCODE_DISABLE_AUTOUPDATE = "1" }

`,
		KeyName: "Anthropic API key", Console: "console.anthropic.com", Header: "x-api-key",
	},
	{
		Name:        "goose",
		Description: "Goose in its ACP mode with Anthropic models (nixpkgs goose-cli; not on npm)",
		Secret:      "ANTHROPIC_API_KEY", Host: "api.anthropic.com", Bin: "goose",
		TOML: `
[packages]
nix = ["goose-cli"]

[agent]
type = "acp"
command = ["goose", "acp"]
env = { GOOSE_PROVIDER = "anthropic", GOOSE_DISABLE_KEYRING = "1" }

`,
		KeyName: "Anthropic API key", Console: "console.anthropic.com", Header: "x-api-key",
	},
}

// Presets are the agent presets, by name.
var Presets = func() map[string]Preset {
	m := map[string]Preset{}
	for _, p := range presetList {
		m[p.Name] = p
	}
	return m
}()

// PresetNames are the presets' names, sorted.
func PresetNames() []string { return slices.Sorted(maps.Keys(Presets)) }

// applyPreset merges the preset that [agent] preset names under the
// document: the file's keys win. It reports an unknown preset and leaves
// the document alone.
func (d *doc) applyPreset() {
	agent, ok := d.root["agent"].(map[string]any)
	if !ok {
		return
	}
	raw, ok := agent["preset"]
	if !ok {
		return
	}
	delete(agent, "preset")
	name, ok := raw.(string)
	if !ok {
		d.errorf("agent.preset", "want a preset name (one of %s), got %s", strings.Join(PresetNames(), ", "), tomlType(raw))
		return
	}
	p, ok := Presets[name]
	if !ok {
		d.errorf("agent.preset", "%q is not an agent preset: use one of %s%s", name, strings.Join(PresetNames(), ", "), didYouMean(name, PresetNames()))
		return
	}
	var base map[string]any
	if err := toml.Unmarshal([]byte(p.toml()), &base); err != nil {
		panic(fmt.Sprintf("preset %s: %v", name, err)) // the presets are tested
	}
	if t, ok := agent["type"]; ok && t != "acp" {
		d.errorf("agent.type", "preset %q is an ACP agent: drop type, or use type = \"acp\"", name)
	}
	d.root = mergePreset(base, d.root, "")
}

// mergePreset is over laid on base: tables merge key by key, lists of
// [packages] are joined, over's first (over's npm package of a name
// replacing base's),
// any other value of over replaces base's.
func mergePreset(base, over map[string]any, path string) map[string]any {
	out := maps.Clone(base)
	for k, v := range over {
		p := k
		if path != "" {
			p = path + "." + k
		}
		bv, inBase := out[k]
		switch {
		case !inBase:
			out[k] = v
		case isTable(bv) && isTable(v):
			out[k] = mergePreset(bv.(map[string]any), v.(map[string]any), p)
		case (p == "packages.npm" || p == "packages.nix") && isList(bv) && isList(v):
			key := func(x any) string {
				s, _ := x.(string)
				if p == "packages.npm" {
					s, _ = splitNpm(s)
				}
				return s
			}
			mine := map[string]bool{}
			for _, x := range v.([]any) {
				mine[key(x)] = true
			}
			var joined []any
			for _, x := range bv.([]any) {
				if !mine[key(x)] {
					joined = append(joined, x)
				}
			}
			out[k] = append(slices.Clone(v.([]any)), joined...)
		default:
			out[k] = v
		}
	}
	return out
}

func isTable(v any) bool { _, ok := v.(map[string]any); return ok }
func isList(v any) bool  { _, ok := v.([]any); return ok }
