package generator

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

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

// Pod Security levels [deploy.kubernetes] pod_security may name: the
// Kubernetes Pod Security Standards a namespace enforces
// (pod-security.kubernetes.io/enforce), and what kubernetes.json's pod
// then meets.
const (
	// PodBaseline: the kit starts as root, as the images do, with only
	// the capabilities it uses (KubeCapabilities), so that every session
	// gets a uid of its own.
	PodBaseline = "baseline"
	// PodRestricted: the kit runs as the glovebox user (uid 10001) with
	// no capability; sessions share that uid and are kept apart by
	// Landlock and seccomp.
	PodRestricted = "restricted"
)

// PodSecurityLevels are the values of [deploy.kubernetes] pod_security.
var PodSecurityLevels = []string{PodBaseline, PodRestricted}

// Kubernetes is [deploy.kubernetes].
type Kubernetes struct {
	// PodSecurity is PodBaseline (the default) or PodRestricted.
	PodSecurity string
}

// KubeCapabilities are the capabilities kubernetes.json gives the kit
// under PodBaseline, after dropping ALL: what a root kit uses to run
// sessions under their own uids. CHOWN gives a session its directories
// and inputs; DAC_OVERRIDE and FOWNER let the kit read, collect, chmod and
// remove what sessions own (mode 0700); SETUID and SETGID start a
// session's commands under its uid with no supplementary groups; KILL
// ends a session's processes; SETPCAP empties the sandbox supervisor's
// capability bounding set (PR_CAPBSET_DROP). Every one is in the set the
// Baseline level allows. Not SYS_ADMIN: without it (and under the
// runtime's default seccomp profile) the kit has no mount, pid or network
// namespaces, and Landlock and seccomp take their place.
var KubeCapabilities = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETPCAP", "SETUID"}

// glovebox user of the images, which owns their writable directories.
const imageUID = 10001

// Railway is [deploy.railway].
type Railway struct {
	// Builder is BuilderDockerfile or BuilderNixpacks.
	Builder string
}

// Fly is [deploy.fly]. Empty strings mean "not set".
type Fly struct {
	// App is the Fly app name, global on Fly; empty keeps what fly.toml
	// has (what `fly launch` wrote), else the box name.
	App string
	// Region is the primary region, a Fly region code such as "ams".
	Region string
	// Size is a Fly VM size preset such as "shared-cpu-2x".
	Size string
	// Memory is the VM memory in MB, 0 for the preset's, or limits.memory.
	MemoryMB int64
}

// flySize is one of Fly's VM size presets: its CPU kind and count and its
// default memory. Memory may range from MinPerCPU to MaxPerCPU times the
// CPU count in steps of 256 MB (fly.io/docs/machines/guides-examples/machine-sizing).
type flySize struct {
	Kind      string
	CPUs      int
	MemoryMB  int64
	MinPerCPU int64
	MaxPerCPU int64
}

var flySizes = map[string]flySize{
	"shared-cpu-1x":   {"shared", 1, 256, 256, 2048},
	"shared-cpu-2x":   {"shared", 2, 512, 256, 2048},
	"shared-cpu-4x":   {"shared", 4, 1024, 256, 2048},
	"shared-cpu-8x":   {"shared", 8, 2048, 256, 2048},
	"performance-1x":  {"performance", 1, 2048, 2048, 8192},
	"performance-2x":  {"performance", 2, 4096, 2048, 8192},
	"performance-4x":  {"performance", 4, 8192, 2048, 8192},
	"performance-8x":  {"performance", 8, 16384, 2048, 8192},
	"performance-16x": {"performance", 16, 32768, 2048, 8192},
}

// flyRegions are Fly's public region codes (fly.io/docs/reference/regions).
var flyRegions = []string{
	"ams", "arn", "atl", "bog", "bom", "bos", "cdg", "den", "dfw", "ewr", "eze", "fra",
	"gdl", "gig", "gru", "hkg", "iad", "jnb", "lax", "lhr", "mad", "mia", "nrt", "ord",
	"otp", "phx", "qro", "scl", "sea", "sin", "sjc", "syd", "waw", "yul", "yyz",
}

// flyAppRE is Fly's rule for app names: lowercase letters, digits and
// dashes, starting with a letter or digit.
var flyAppRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

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

// kubernetes decodes [deploy.kubernetes]: the Pod Security level the
// pod is made for.
func (d *doc) kubernetes(p string, v any, c *Config) {
	t, ok := d.table(p, v, "pod_security")
	if !ok {
		return
	}
	if x, ok := t["pod_security"]; ok {
		if s, ok := d.str(p+".pod_security", x); ok {
			if slices.Contains(PodSecurityLevels, s) {
				c.Deploy.Kubernetes.PodSecurity = s
			} else {
				d.errorf(p+".pod_security", "%q is not a Pod Security level%s: use \"baseline\" (the kit as root, a uid per session) or \"restricted\" (the kit as uid 10001, sessions kept apart by Landlock and seccomp)", s, didYouMean(s, PodSecurityLevels))
			}
		}
	}
}

func (d *doc) fly(p string, v any, c *Config) {
	t, ok := d.table(p, v, "app", "region", "size", "memory")
	if !ok {
		return
	}
	f := &c.Deploy.Fly
	if x, ok := t["app"]; ok {
		if s, ok := d.str(p+".app", x); ok {
			if !flyAppRE.MatchString(s) {
				d.errorf(p+".app", "%q is not a Fly app name: use 1 to 63 lowercase letters, digits and -, starting with a letter or digit (app names are global on Fly)", s)
			}
			f.App = s
		}
	}
	if x, ok := t["region"]; ok {
		if s, ok := d.str(p+".region", x); ok {
			if !slices.Contains(flyRegions, s) {
				d.errorf(p+".region", "%q is not a Fly region%s; use one of %s (`fly platform regions` lists them)", s, didYouMean(s, flyRegions), strings.Join(flyRegions, ", "))
			}
			f.Region = s
		}
	}
	if x, ok := t["size"]; ok {
		if s, ok := d.str(p+".size", x); ok {
			if _, known := flySizes[s]; !known {
				d.errorf(p+".size", "%q is not a Fly VM size%s; use one of %s", s, didYouMean(s, slices.Sorted(maps.Keys(flySizes))), strings.Join(slices.Sorted(maps.Keys(flySizes)), ", "))
			}
			f.Size = s
		}
	}
	if x, ok := t["memory"]; ok {
		if s, ok := d.str(p+".memory", x); ok {
			mb, err := MemoryMB(s)
			if err != nil {
				d.errorf(p+".memory", "%v", err)
			}
			f.MemoryMB = mb
		}
	}
}

// didYouMean is " (did you mean "x"?)" for the nearest of allowed, or "".
func didYouMean(s string, allowed []string) string {
	if near := nearest(s, allowed); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}

// flyVM is the [[vm]] of fly.toml: a preset and its memory, chosen from
// [deploy.fly] and [limits], checked against Fly's rules.
type flyVM struct {
	Size     string
	MemoryMB int64
}

// keyError is a problem with one key of glovebox.toml.
type keyError struct{ Key, Msg string }

func (e *keyError) Error() string { return e.Key + ": " + e.Msg }

// flyMachine picks the VM: [deploy.fly] size, else the smallest shared
// preset with at least limits.cpu CPUs; memory from [deploy.fly] memory,
// else limits.memory, else the larger of the preset's and 1024 MB. It
// reports what Fly would reject instead of emitting it.
func flyMachine(c *Config) (flyVM, error) {
	size := c.Deploy.Fly.Size
	if size == "" {
		want := 1.0
		if c.Limits.CPU != "" {
			fmt.Sscan(c.Limits.CPU, &want)
		}
		for _, n := range []int{1, 2, 4, 8} {
			if float64(n) >= want {
				size = fmt.Sprintf("shared-cpu-%dx", n)
				break
			}
		}
		if size == "" {
			return flyVM{}, &keyError{"limits.cpu", fmt.Sprintf("%s CPUs: a shared Fly VM has at most 8; set [deploy.fly] size to a performance preset such as \"performance-16x\"", c.Limits.CPU)}
		}
	}
	preset := flySizes[size]
	mem, from := c.Deploy.Fly.MemoryMB, "deploy.fly.memory"
	if mem == 0 && c.Limits.Memory != "" {
		mem, _ = MemoryMB(c.Limits.Memory)
		from = "limits.memory"
	}
	if mem == 0 {
		mem, from = max(preset.MemoryMB, 1024), ""
		mem = min(mem, preset.MaxPerCPU*int64(preset.CPUs))
	}
	if from != "" {
		lo, hi := preset.MinPerCPU*int64(preset.CPUs), preset.MaxPerCPU*int64(preset.CPUs)
		switch {
		case mem%256 != 0:
			return flyVM{}, &keyError{from, fmt.Sprintf("Fly wants memory in steps of 256 MB, got %d MB: use %d or %d MB (or set [deploy.fly] memory)", mem, max(mem/256*256, 256), (mem/256+1)*256)}
		case mem < lo || mem > hi:
			return flyVM{}, &keyError{from, fmt.Sprintf("a Fly %s takes %d to %d MB of memory, got %d MB: change the memory or [deploy.fly] size", size, lo, hi, mem)}
		}
	}
	return flyVM{Size: size, MemoryMB: mem}, nil
}

// keptFly returns the app and primary_region of a fly.toml already in the
// output directory (what `fly launch` wrote), empty when absent.
func keptFly(prev []byte) (app, region string) {
	var f struct {
		App           string `toml:"app"`
		PrimaryRegion string `toml:"primary_region"`
	}
	if len(prev) == 0 || toml.NewDecoder(bytes.NewReader(prev)).Decode(&f) != nil {
		return "", ""
	}
	if !flyAppRE.MatchString(f.App) {
		f.App = ""
	}
	if !slices.Contains(flyRegions, f.PrimaryRegion) {
		f.PrimaryRegion = ""
	}
	return f.App, f.PrimaryRegion
}

// railwayConfig is railway.json: the builder chosen explicitly (Railway
// would otherwise pick the Dockerfile when it finds one, or Railpack,
// which ignores nixpacks.toml), a /health check, a restart policy, one
// replica (sessions live on one machine).
func railwayConfig(c *Config) map[string]any {
	build := map[string]any{"builder": "DOCKERFILE", "dockerfilePath": DockerFile}
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

// KubernetesFile is the Kubernetes manifest Generate writes.
const KubernetesFile = "kubernetes.json"

// kubernetes is kubernetes.json: a List of a Deployment and a Service,
// for `kubectl apply -f`. The Deployment runs the box image with the key
// (and the box's other secrets) from a Secret named after the box, probes
// /health, and takes its resources from [limits]; the Service gives
// clients session affinity, since a session and its files live on one pod.
func kubernetes(c *Config) map[string]any {
	labels := map[string]any{"app.kubernetes.io/name": c.Name, "app.kubernetes.io/part-of": "glovebox"}
	selector := map[string]any{"app.kubernetes.io/name": c.Name}
	// Readiness and startup read /health, which answers 503 while the box
	// drains so that the Service moves away; liveness reads /health/live,
	// which stays 200 while the kit serves, so that a drain is never read
	// as a hung container to restart.
	probe := func(path string, period, failures int) map[string]any {
		return map[string]any{
			"httpGet":          map[string]any{"path": path, "port": "http"},
			"periodSeconds":    period,
			"timeoutSeconds":   5,
			"failureThreshold": failures,
		}
	}
	container := map[string]any{
		"name":            "box",
		"image":           c.Name + ":" + c.Version,
		"imagePullPolicy": "IfNotPresent",
		"ports":           []any{map[string]any{"name": "http", "containerPort": Port, "protocol": "TCP"}},
		"env": []any{map[string]any{
			"name":      "GLOVEBOX_KEY",
			"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": c.Name, "key": "GLOVEBOX_KEY"}},
		}},
		"envFrom":         []any{map[string]any{"secretRef": map[string]any{"name": c.Name, "optional": true}}},
		"readinessProbe":  probe("/health", 10, 3),
		"livenessProbe":   probe("/health/live", 30, 3),
		"startupProbe":    probe("/health", 2, 30),
		"securityContext": kubeContainerSecurity(c),
	}
	if limits := kubeLimits(c); len(limits) > 0 {
		container["resources"] = map[string]any{"limits": limits, "requests": limits}
	}
	deployment := map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": c.Name, "labels": labels},
		"spec": map[string]any{
			"replicas": 1,
			"selector": map[string]any{"matchLabels": selector},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"containers":      []any{container},
					"securityContext": kubePodSecurity(c),
					// The kit never calls the Kubernetes API, and a
					// mounted token would be one more secret in reach of
					// a session.
					"automountServiceAccountToken":  false,
					"terminationGracePeriodSeconds": KillTimeout(c),
				},
			},
		},
	}
	service := map[string]any{
		"apiVersion": "v1",
		"kind":       "Service",
		"metadata":   map[string]any{"name": c.Name, "labels": labels},
		"spec": map[string]any{
			"selector":              selector,
			"ports":                 []any{map[string]any{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}},
			"sessionAffinity":       "ClientIP",
			"sessionAffinityConfig": map[string]any{"clientIP": map[string]any{"timeoutSeconds": 3 * 3600}},
		},
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{deployment, service}}
}

// kubePodSecurity is the pod's securityContext for the box's Pod Security
// level: the runtime's default seccomp profile always; under baseline the
// kit as the image starts it, as root (runAsNonRoot false says so); under
// restricted the glovebox user of the images, which owns their writable
// directories (fsGroup gives it the pod's volumes too).
func kubePodSecurity(c *Config) map[string]any {
	sc := map[string]any{"seccompProfile": map[string]any{"type": "RuntimeDefault"}}
	if c.Deploy.Kubernetes.PodSecurity == PodRestricted {
		sc["runAsNonRoot"] = true
		sc["runAsUser"] = imageUID
		sc["runAsGroup"] = imageUID
		sc["fsGroup"] = imageUID
	} else {
		sc["runAsNonRoot"] = false
	}
	return sc
}

// kubeContainerSecurity is the box container's securityContext: no
// privilege escalation, not privileged, every capability dropped and,
// under baseline, KubeCapabilities added back.
func kubeContainerSecurity(c *Config) map[string]any {
	caps := map[string]any{"drop": []any{"ALL"}}
	if c.Deploy.Kubernetes.PodSecurity != PodRestricted {
		add := make([]any, len(KubeCapabilities))
		for i, k := range KubeCapabilities {
			add[i] = k
		}
		caps["add"] = add
	}
	return map[string]any{
		"allowPrivilegeEscalation": false,
		"privileged":               false,
		"capabilities":             caps,
	}
}

// kubeLimits are [limits] as Kubernetes resource quantities.
func kubeLimits(c *Config) map[string]any {
	out := map[string]any{}
	if c.Limits.CPU != "" {
		out["cpu"] = c.Limits.CPU
	}
	if c.Limits.Memory != "" {
		if mb, err := MemoryMB(c.Limits.Memory); err == nil {
			out["memory"] = fmt.Sprintf("%dMi", mb)
		}
	}
	return out
}

// drainMargin is what a platform's kill timeout adds to the box's drain
// time: the kit needs a moment after the drain to park outputs, close its
// store and exit before the platform sends SIGKILL.
const drainMargin = 5

// maxFlyKillTimeout is the largest kill_timeout Fly accepts, in seconds.
const maxFlyKillTimeout = 300

// KillTimeout is how long, in seconds, a platform should wait between
// SIGTERM and SIGKILL: the box's drain time (sessions.drain, default 30s)
// plus a margin. Kubernetes' terminationGracePeriodSeconds is this;
// fly.toml's kill_timeout is this capped at Fly's 300 s (FlyKillTimeout).
func KillTimeout(c *Config) int {
	m := protocol.Manifest{Sessions: c.Sessions}
	secs := int((m.DrainTime() + time.Second - 1) / time.Second)
	return secs + drainMargin
}

// FlyKillTimeout is fly.toml's kill_timeout: KillTimeout, at most the 300 s
// Fly accepts. capped reports that Fly will kill the box before its drain
// ends.
func FlyKillTimeout(c *Config) (secs int, capped bool) {
	k := KillTimeout(c)
	return min(k, maxFlyKillTimeout), k > maxFlyKillTimeout
}
