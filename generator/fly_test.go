package generator

import (
	"bytes"
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// flyConfig holds the fly.toml keys the generator writes, named as in
// flyctl's appconfig (app, primary_region, build.dockerfile, env,
// http_service with its checks, vm); decoding is strict, so a key flyctl
// does not know fails.
type flyConfig struct {
	App           string `toml:"app"`
	PrimaryRegion string `toml:"primary_region"`
	KillSignal    string `toml:"kill_signal"`
	KillTimeout   int    `toml:"kill_timeout"`
	Build         struct {
		Dockerfile string `toml:"dockerfile"`
	} `toml:"build"`
	Env         map[string]string `toml:"env"`
	HTTPService struct {
		InternalPort       int    `toml:"internal_port"`
		ForceHTTPS         bool   `toml:"force_https"`
		AutoStopMachines   string `toml:"auto_stop_machines"`
		AutoStartMachines  bool   `toml:"auto_start_machines"`
		MinMachinesRunning int    `toml:"min_machines_running"`
		Checks             []struct {
			Method      string `toml:"method"`
			Path        string `toml:"path"`
			Interval    string `toml:"interval"`
			Timeout     string `toml:"timeout"`
			GracePeriod string `toml:"grace_period"`
		} `toml:"checks"`
	} `toml:"http_service"`
	VM []struct {
		Size     string `toml:"size"`
		MemoryMB int64  `toml:"memory_mb"`
	} `toml:"vm"`
}

// checkFlyVM applies Fly's sizing rules (fly.io/docs/machines/guides-examples/machine-sizing):
// a known preset; memory a multiple of 256 MB, from 256 MB (shared) or
// 2048 MB (performance) per CPU to 2048 MB or 8192 MB per CPU.
func checkFlyVM(t *testing.T, size string, mem int64) {
	t.Helper()
	cpus := map[string]int64{
		"shared-cpu-1x": 1, "shared-cpu-2x": 2, "shared-cpu-4x": 4, "shared-cpu-8x": 8,
		"performance-1x": 1, "performance-2x": 2, "performance-4x": 4, "performance-8x": 8, "performance-16x": 16,
	}
	n, ok := cpus[size]
	if !ok {
		t.Fatalf("vm size %q is not one of Fly's presets", size)
	}
	lo, hi := 256*n, 2048*n
	if strings.HasPrefix(size, "performance-") {
		lo, hi = 2048*n, 8192*n
	}
	if mem%256 != 0 || mem < lo || mem > hi {
		t.Errorf("vm %s with %d MB: Fly takes %d to %d MB in steps of 256", size, mem, lo, hi)
	}
}

func decodeFly(t *testing.T, data []byte) flyConfig {
	t.Helper()
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f flyConfig
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("fly.toml: %v\n%s", err, data)
	}
	return f
}

func TestFlyToml(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		box, app, region, size string
		mem                    int64
		secrets                string
	}{
		{"minimal", "minimal", "", "shared-cpu-1x", 1024, `GLOVEBOX_KEY="$(cat glovebox.key)"` + "\n"},
		{"media", "acme-media-extractor", "ams", "shared-cpu-2x", 2048, `GLOVEBOX_KEY="$(cat glovebox.key)" OPENAI_API_KEY=...` + "\n"},
		{"python", "sci", "", "performance-1x", 2048, `GLOVEBOX_KEY="$(cat glovebox.key)"` + "\n"},
		{"hostile", "hostile", "", "shared-cpu-1x", 1024, ""},
	} {
		t.Run(tc.box, func(t *testing.T) {
			res := generateCase(t, filepath.Join("testdata", tc.box), Options{})
			data := fileData(t, res, FlyFile)
			f := decodeFly(t, data)
			if f.App != tc.app || f.PrimaryRegion != tc.region || f.Build.Dockerfile != DockerFile {
				t.Errorf("app %q region %q dockerfile %q, want %q %q %q", f.App, f.PrimaryRegion, f.Build.Dockerfile, tc.app, tc.region, DockerFile)
			}
			if f.HTTPService.InternalPort != 8080 {
				t.Errorf("internal_port = %d, want 8080", f.HTTPService.InternalPort)
			}
			if len(f.HTTPService.Checks) != 1 || f.HTTPService.Checks[0].Path != "/health" || f.HTTPService.Checks[0].Method != "GET" {
				t.Errorf("checks = %+v, want one GET /health", f.HTTPService.Checks)
			}
			if len(f.VM) != 1 || f.VM[0].Size != tc.size || f.VM[0].MemoryMB != tc.mem {
				t.Fatalf("vm = %+v, want %s with %d MB", f.VM, tc.size, tc.mem)
			}
			checkFlyVM(t, f.VM[0].Size, f.VM[0].MemoryMB)
			if f.Env["GLOVEBOX_PUBLIC_URL"] != "https://"+tc.app+".fly.dev" {
				t.Errorf("GLOVEBOX_PUBLIC_URL = %q, want the app's fly.dev name", f.Env["GLOVEBOX_PUBLIC_URL"])
			}
			if tc.secrets != "" && !strings.Contains(string(data), "fly secrets set "+tc.secrets) {
				t.Errorf("fly.toml does not say to set the secrets %s:\n%s", tc.secrets, data)
			}
			if f.KillSignal != "SIGTERM" || f.KillTimeout != 35 {
				t.Errorf("kill_signal %q kill_timeout %d, want SIGTERM and 35 (the default 30s drain plus 5s)", f.KillSignal, f.KillTimeout)
			}
		})
	}
}

// TestDrainDeployAgree checks that fly.toml's kill_timeout and Kubernetes'
// terminationGracePeriodSeconds both give the box its sessions.drain plus
// the margin; Fly's is capped at the 300 s it accepts, with a warning.
func TestDrainDeployAgree(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		drain      string
		fly, grace int
	}{{"", 35, 35}, {"10s", 15, 15}, {"90s", 95, 95}, {"2m", 125, 125}, {"295s", 300, 300}, {"1h", 300, 3605}} {
		t.Run(cmp.Or(tc.drain, "default"), func(t *testing.T) {
			src := "name = \"d\"\nversion = \"1.0.0\"\nbase = \"base\"\n"
			if tc.drain != "" {
				src += "[sessions]\ndrain = \"" + tc.drain + "\"\n"
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "glovebox.toml"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			res := generateCase(t, dir, Options{})
			f := decodeFly(t, fileData(t, res, FlyFile))
			if f.KillTimeout != tc.fly {
				t.Errorf("fly.toml kill_timeout = %d, want %d", f.KillTimeout, tc.fly)
			}
			warned := slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "kill_timeout of at most 300 s") })
			if warned != (tc.grace > tc.fly) {
				t.Errorf("warnings %q: a warning that Fly cuts the drain short = %v, want %v", res.Warnings, warned, tc.grace > tc.fly)
			}
			var list struct {
				Items []struct {
					Kind string `json:"kind"`
					Spec struct {
						Template struct {
							Spec struct {
								Grace int `json:"terminationGracePeriodSeconds"`
							} `json:"spec"`
						} `json:"template"`
					} `json:"spec"`
				} `json:"items"`
			}
			if err := json.Unmarshal(fileData(t, res, KubernetesFile), &list); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, it := range list.Items {
				if it.Kind == "Deployment" {
					found = true
					if it.Spec.Template.Spec.Grace != tc.grace {
						t.Errorf("kubernetes terminationGracePeriodSeconds = %d, want %d", it.Spec.Template.Spec.Grace, tc.grace)
					}
				}
			}
			if !found {
				t.Errorf("kubernetes.json has no Deployment")
			}
		})
	}
}

// TestFlySizes maps limits and [deploy.fly] to Fly's presets, and refuses
// what Fly would reject, at the key's line.
func TestFlySizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, toml, size string
		mem              int64
		err              string
	}{
		{"half a cpu", "[limits]\ncpu = 0.5\n", "shared-cpu-1x", 1024, ""},
		{"three cpus", "[limits]\ncpu = 3\n", "shared-cpu-4x", 1024, ""},
		{"eight cpus", "[limits]\ncpu = 8\nmemory = \"16GB\"\n", "shared-cpu-8x", 16384, ""},
		{"preset memory", "[deploy.fly]\nsize = \"performance-2x\"\n", "performance-2x", 4096, ""},
		{"memory override", "[limits]\nmemory = \"300MB\"\n[deploy.fly]\nmemory = \"512MB\"\n", "shared-cpu-1x", 512, ""},
		{"300 MB", "[limits]\nmemory = \"300MB\"\n", "", 0, "glovebox.toml:2: limits.memory: Fly wants memory in steps of 256 MB, got 300 MB: use 256 or 512 MB"},
		{"too much", "[limits]\nmemory = \"4GB\"\n", "", 0, "limits.memory: a Fly shared-cpu-1x takes 256 to 2048 MB"},
		{"too little", "[deploy.fly]\nsize = \"performance-1x\"\nmemory = \"1GB\"\n", "", 0, "deploy.fly.memory: a Fly performance-1x takes 2048 to 8192 MB"},
		{"twelve cpus", "[limits]\ncpu = 12\n", "", 0, "limits.cpu: 12 CPUs: a shared Fly VM has at most 8"},
		{"size typo", "[deploy.fly]\nsize = \"shared-cpu-3x\"\n", "", 0, `deploy.fly.size: "shared-cpu-3x" is not a Fly VM size (did you mean "shared-cpu-1x"?)`},
		{"region typo", "[deploy.fly]\nregion = \"amz\"\n", "", 0, `glovebox.toml:2: deploy.fly.region: "amz" is not a Fly region (did you mean "ams"?)`},
		{"app", "[deploy.fly]\napp = \"My_App\"\n", "", 0, `"My_App" is not a Fly app name`},
		{"unknown key", "[deploy.fly]\nregions = [\"ams\"]\n", "", 0, `unknown key "regions" (did you mean "region"?)`},
		{"builder", "[deploy.railway]\nbuilder = \"railpack\"\n", "", 0, `"railpack" is not a builder`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("glovebox.toml", []byte(tc.toml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Parse = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			res, err := Generate(c, Options{Key: testKey})
			if err != nil {
				t.Fatal(err)
			}
			f := decodeFly(t, fileData(t, res, FlyFile))
			if len(f.VM) != 1 || f.VM[0].Size != tc.size || f.VM[0].MemoryMB != tc.mem {
				t.Fatalf("vm = %+v, want %s with %d MB", f.VM, tc.size, tc.mem)
			}
			checkFlyVM(t, f.VM[0].Size, f.VM[0].MemoryMB)
		})
	}
}

// TestFlyKeepsLaunch: the app and region `fly launch` wrote into fly.toml
// survive the next generate unless [deploy.fly] sets them.
func TestFlyKeepsLaunch(t *testing.T) {
	t.Parallel()
	launched := []byte("app = 'box-x7f2'\nprimary_region = 'fra'\n[build]\ndockerfile = 'Dockerfile'\n")
	for _, tc := range []struct {
		toml, app, region string
	}{
		{`name = "box"`, "box-x7f2", "fra"},
		{"name = \"box\"\n[deploy.fly]\napp = \"mine\"\nregion = \"ams\"\n", "mine", "ams"},
	} {
		c, err := Parse("glovebox.toml", []byte(tc.toml))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Generate(c, Options{Key: testKey, PreviousFly: launched})
		if err != nil {
			t.Fatal(err)
		}
		if f := decodeFly(t, fileData(t, res, FlyFile)); f.App != tc.app || f.PrimaryRegion != tc.region {
			t.Errorf("%q: app %q region %q, want %q %q", tc.toml, f.App, f.PrimaryRegion, tc.app, tc.region)
		}
	}
}

// railwayJSON holds what Railway's config-as-code reference documents
// (docs.railway.com/reference/config-as-code) for the keys the generator
// writes; decoding is strict and the enums are checked.
type railwayJSON struct {
	Schema string `json:"$schema"`
	Build  struct {
		Builder            string `json:"builder"`
		DockerfilePath     string `json:"dockerfilePath"`
		NixpacksConfigPath string `json:"nixpacksConfigPath"`
	} `json:"build"`
	Deploy struct {
		StartCommand            string `json:"startCommand"`
		HealthcheckPath         string `json:"healthcheckPath"`
		HealthcheckTimeout      int    `json:"healthcheckTimeout"`
		NumReplicas             int    `json:"numReplicas"`
		RestartPolicyType       string `json:"restartPolicyType"`
		RestartPolicyMaxRetries int    `json:"restartPolicyMaxRetries"`
	} `json:"deploy"`
}

func TestRailwayJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ box, builder, path string }{
		{"minimal", "DOCKERFILE", DockerFile},
		{"python", "NIXPACKS", NixpacksFile},
		// A Go agent's context is the box directory, Railway's Root
		// Directory: the Dockerfile is in dist/ there.
		{"goagent", "DOCKERFILE", "dist/" + DockerFile},
	} {
		t.Run(tc.box, func(t *testing.T) {
			res := generateCase(t, filepath.Join("testdata", tc.box), Options{})
			dec := json.NewDecoder(bytes.NewReader(fileData(t, res, RailwayFile)))
			dec.DisallowUnknownFields()
			var r railwayJSON
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("railway.json: %v", err)
			}
			if r.Schema != "https://railway.com/railway.schema.json" {
				t.Errorf("$schema = %q", r.Schema)
			}
			if !slices.Contains([]string{"RAILPACK", "DOCKERFILE", "NIXPACKS"}, r.Build.Builder) || r.Build.Builder != tc.builder {
				t.Errorf("builder = %q, want %s", r.Build.Builder, tc.builder)
			}
			if got := r.Build.DockerfilePath + r.Build.NixpacksConfigPath; got != tc.path {
				t.Errorf("builder's file = %q, want %q", got, tc.path)
			}
			fileData(t, res, strings.TrimPrefix(tc.path, "dist/")) // the file it names is generated
			if tc.builder == "NIXPACKS" && r.Deploy.StartCommand != nixpacksStartCmd {
				t.Errorf("startCommand = %q, want nixpacks.toml's %q", r.Deploy.StartCommand, nixpacksStartCmd)
			}
			if r.Deploy.HealthcheckPath != "/health" || r.Deploy.HealthcheckTimeout <= 0 {
				t.Errorf("healthcheck %q within %ds, want /health", r.Deploy.HealthcheckPath, r.Deploy.HealthcheckTimeout)
			}
			if !slices.Contains([]string{"ON_FAILURE", "ALWAYS", "NEVER"}, r.Deploy.RestartPolicyType) || r.Deploy.RestartPolicyMaxRetries <= 0 {
				t.Errorf("restart policy %q with %d retries", r.Deploy.RestartPolicyType, r.Deploy.RestartPolicyMaxRetries)
			}
			if r.Deploy.NumReplicas != 1 {
				t.Errorf("numReplicas = %d, want 1: Railway has no fly-replay, so a session must stay on one replica", r.Deploy.NumReplicas)
			}
		})
	}
}
