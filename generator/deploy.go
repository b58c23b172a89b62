package generator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// RailwayFile is the Railway config-as-code file Generate writes.
const RailwayFile = "railway.json"

// Railway builders glovebox.toml may choose in [deploy.railway]; the
// Dockerfile is the default (see generator/README.md for why).
const (
	BuilderDockerfile = "dockerfile"
	BuilderNixpacks   = "nixpacks"
)

// Deploy is glovebox.toml's [deploy] table: per-platform settings.
type Deploy struct {
	Fly        Fly
	Railway    Railway
	Kubernetes Kubernetes
}

// Railway is [deploy.railway].
type Railway struct {
	// Builder is BuilderDockerfile or BuilderNixpacks.
	Builder string
}

func (d *doc) deploy(path string, v any, c *Config) {
	m, ok := d.table(path, v, "fly", "railway", "kubernetes")
	if !ok {
		return
	}
	if x, ok := m["kubernetes"]; ok {
		d.kubernetes(path+".kubernetes", x, c)
	}
	if x, ok := m["railway"]; ok {
		p := path + ".railway"
		if t, ok := d.table(p, x, "builder"); ok {
			if x, ok := t["builder"]; ok {
				if s, ok := d.str(p+".builder", x); ok {
					switch s {
					case BuilderDockerfile, BuilderNixpacks:
						c.Deploy.Railway.Builder = s
					default:
						d.errorf(p+".builder", "%q is not a builder: use \"dockerfile\" (the Nix image, as flake.nix builds it) or \"nixpacks\" (nixpacks.toml)%s", s, didYouMean(s, []string{BuilderDockerfile, BuilderNixpacks}))
					}
				}
			}
		}
	}
	if x, ok := m["fly"]; ok {
		d.fly(path+".fly", x, c)
	}
}

// didYouMean is " (did you mean "x"?)" for the nearest of allowed, or "".
func didYouMean(s string, allowed []string) string {
	if near := nearest(s, allowed); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}

// keyError is a problem with one key of glovebox.toml.
type keyError struct{ Key, Msg string }

func (e *keyError) Error() string { return e.Key + ": " + e.Msg }

// railwayConfig is railway.json: the builder chosen explicitly (Railway
// would otherwise pick the Dockerfile when it finds one, or Railpack,
// which ignores nixpacks.toml), a /health check, a restart policy, one
// replica (sessions live on one machine).
//
// Railway reads it only from the repository's root or from the absolute
// path the service's "Config File" setting names (it does not follow the
// Root Directory), so the docs have the user set both: the Root Directory
// is the build context and dockerfilePath is relative to it. That is
// dist/ for a box, with the Dockerfile beside railway.json; for a Go
// agent it is the box directory (the Go module), dist/ in it.
func railwayConfig(c *Config) map[string]any {
	dockerfile := DockerFile
	if c.AgentMain != "" {
		dockerfile = "dist/" + DockerFile
	}
	build := map[string]any{"builder": "DOCKERFILE", "dockerfilePath": dockerfile}
	deploy := map[string]any{
		"healthcheckPath":         "/health",
		"healthcheckTimeout":      300,
		"numReplicas":             1,
		"restartPolicyType":       "ON_FAILURE",
		"restartPolicyMaxRetries": 10,
	}
	if c.Deploy.Railway.Builder == BuilderNixpacks {
		build = map[string]any{"builder": "NIXPACKS", "nixpacksConfigPath": NixpacksFile}
		deploy["startCommand"] = nixpacksStartCmd
	}
	return map[string]any{
		"$schema": "https://railway.com/railway.schema.json",
		"build":   build,
		"deploy":  deploy,
	}
}

// nixpacksStartCmd is the start command of the nixpacks plan.
const nixpacksStartCmd = "exec /app/bin/glovebox-kit"

// kitAdapters are the storage adapters glovebox-kit has: inputs may also
// come as url refs.
var kitAdapters = []string{protocol.AdapterInline, protocol.AdapterLocalServer, protocol.AdapterS3, protocol.AdapterURL}

// checkAdapter reports an adapter the kit does not have, with the nearest
// name: a typo ("s4") or gcs and azure, which the kit does not implement,
// fail here rather than when the box boots. A Go agent may register
// adapters of its own, so its boxes may name others.
func (d *doc) checkAdapter(p, a string) {
	agent, _ := d.root["agent"].(map[string]any)
	switch {
	case slices.Contains(kitAdapters, a):
	case a == protocol.AdapterGCS || strings.EqualFold(a, "azure"):
		d.errorf(p, "%q is not implemented by the kit: use \"s3\" (Google Cloud Storage speaks it at https://storage.googleapis.com with HMAC keys: set AWS_ENDPOINT_URL_S3) or \"localServer\"", a)
	case agent["type"] == protocol.AgentGo:
		// A custom adapter the agent's own main registers.
	default:
		d.errorf(p, "%q is not a storage adapter%s: use inline, localServer or s3 (url for inputs); a custom adapter needs a Go agent that registers it", a, didYouMean(a, kitAdapters))
	}
}

// drainMargin is what a platform's kill timeout adds to the box's drain
// time: the kit needs a moment after the drain to park outputs, close its
// store and exit before the platform sends SIGKILL.
const drainMargin = 5

// KillTimeout is how long, in seconds, a platform should wait between
// SIGTERM and SIGKILL: the box's drain time (sessions.drain, default 30s)
// plus a margin. Kubernetes' terminationGracePeriodSeconds is this;
// fly.toml's kill_timeout is this capped at Fly's 300 s (FlyKillTimeout).
func KillTimeout(c *Config) int {
	m := protocol.Manifest{Sessions: c.Sessions}
	secs := int((m.DrainTime() + time.Second - 1) / time.Second)
	return secs + drainMargin
}
