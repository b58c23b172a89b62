package generator

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// flyConfig holds the fly.toml keys the generator writes, named as in
// flyctl's appconfig (app, build.dockerfile, env, http_service with its
// checks, vm).
type flyConfig struct {
	App   string `toml:"app"`
	Build struct {
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
		CPUs     int `toml:"cpus"`
		MemoryMB int `toml:"memory_mb"`
	} `toml:"vm"`
}

func TestFlyToml(t *testing.T) {
	for _, tc := range []struct {
		box       string
		cpus, mem int
	}{{"minimal", 1, 1024}, {"media", 2, 2048}, {"hostile", 1, 1024}} {
		t.Run(tc.box, func(t *testing.T) {
			c, err := Load(filepath.Join("testdata", tc.box))
			if err != nil {
				t.Fatal(err)
			}
			res := generateCase(t, filepath.Join("testdata", tc.box), Options{})
			dec := toml.NewDecoder(bytes.NewReader(fileData(t, res, FlyFile)))
			dec.DisallowUnknownFields()
			var f flyConfig
			if err := dec.Decode(&f); err != nil {
				t.Fatalf("fly.toml: %v", err)
			}
			if f.App != c.Name || f.Build.Dockerfile != DockerFile {
				t.Errorf("app %q dockerfile %q, want %q %q", f.App, f.Build.Dockerfile, c.Name, DockerFile)
			}
			if f.HTTPService.InternalPort != 8080 {
				t.Errorf("internal_port = %d, want 8080", f.HTTPService.InternalPort)
			}
			if len(f.HTTPService.Checks) != 1 || f.HTTPService.Checks[0].Path != "/health" || f.HTTPService.Checks[0].Method != "GET" {
				t.Errorf("checks = %+v, want one GET /health", f.HTTPService.Checks)
			}
			if len(f.VM) != 1 || f.VM[0].CPUs != tc.cpus || f.VM[0].MemoryMB != tc.mem {
				t.Errorf("vm = %+v, want %d cpus %d MB", f.VM, tc.cpus, tc.mem)
			}
			if f.Env["GLOVEBOX_PUBLIC_URL"] != "https://"+c.Name+".fly.dev" {
				t.Errorf("GLOVEBOX_PUBLIC_URL = %q", f.Env["GLOVEBOX_PUBLIC_URL"])
			}
		})
	}
}
