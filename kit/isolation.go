package kit

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/sandbox"
	"github.com/glovebox-dev/glovebox/protocol"
)

// sandboxConfig is the manifest's [sandbox] and limits as the sandbox
// takes them. hide lists what no session may see.
func sandboxConfig(m *protocol.Manifest, hide []string, shared bool) sandbox.Config {
	cfg := sandbox.Config{Hide: hide, SharedDirs: shared}
	off := func(b *bool) bool { return b != nil && !*b }
	if sb := m.Sandbox; sb != nil {
		cfg.Off = off(sb.Enabled)
		cfg.NoUsers, cfg.NoMount, cfg.NoPID, cfg.NoNetwork, cfg.NoCgroup = off(sb.Users), off(sb.Mount), off(sb.PID), off(sb.Network), off(sb.Cgroup)
		cfg.UIDBase, cfg.UIDCount = sb.UIDBase, sb.UIDCount
		cfg.Limits.Pids, cfg.Limits.Files = sb.Pids, sb.Files
	}
	// Checked by Manifest.Check: a bad value cannot reach here.
	if m.Limits.Memory != "" {
		cfg.Limits.Memory, _ = protocol.ParseQuantity(m.Limits.Memory)
	}
	if m.Limits.CPU != "" {
		cfg.Limits.CPU, _ = protocol.ParseCPU(m.Limits.CPU)
	}
	if m.Limits.Disk != "" {
		cfg.Limits.Disk, _ = protocol.ParseQuantity(m.Limits.Disk)
	}
	return cfg
}

// openSandbox sets up the box's sandbox and reports it: one boot line,
// a warning when agents would share the kit's uid, and a boot problem for
// every layer the manifest requires that is not in force.
func (s *Server) openSandbox(b *boot) {
	var hide []string
	hide = append(hide, s.stateDir)
	if !s.sharedDirs {
		for _, k := range []string{protocol.MountWork, protocol.MountInput, protocol.MountOutput} {
			if p, ok := s.mounts[k]; ok {
				hide = append(hide, p)
			}
		}
	}
	cfg := sandboxConfig(s.man, hide, s.sharedDirs)
	s.diskLimit = cfg.Limits.Disk
	// The egress proxy's CA bundle lives in the state directory; agents
	// read it there, and nothing else of it.
	cfg.Expose = []string{filepath.Join(s.stateDir, "egress")}
	sb, err := sandbox.New(cfg, s.log)
	if err != nil {
		b.add("%v", err)
		return
	}
	s.sb = sb
	r := sb.Report()
	s.log.Info(r.String())
	if !r.Has(sandbox.LayerUsers) && !r.Has(sandbox.LayerUserNS) {
		s.log.Warn("sandbox: agents run as the kit's own user: a prompt can reach the kit's files and every session's; run the kit as root (the images do) for a uid per session")
	}
	if spec := s.man.Sandbox; spec != nil {
		for _, l := range spec.Require {
			if !r.Has(l) {
				why := r.Inactive[l]
				if why == "" {
					why = "not available"
				}
				b.add("sandbox.require: the %s layer is not in force here: %s", l, why)
			}
		}
	}
}

// isolation is the sandbox report as /environment shows it.
func (s *Server) isolation() *protocol.Isolation {
	if s.sb == nil {
		return nil
	}
	r := s.sb.Report()
	return &protocol.Isolation{
		Active: r.Active, Inactive: r.Inactive, UIDs: r.UIDs, Cgroup: r.Cgroup, Landlock: r.Landlock,
		Limits: protocol.IsolationLimits(r.Limits),
	}
}

// sessionEnv is the environment a session's agents start with: the box's
// base environment, HOME and the session's GLOVEBOX_* variables.
func (s *Server) sessionEnv(id string, dirs dirSet) []string {
	env := make([]string, 0, len(s.baseEnv)+5)
	env = append(env, s.baseEnv...)
	home := dirs.Work
	if home == "" {
		home = "/"
	}
	return append(env,
		"HOME="+home,
		"GLOVEBOX_WORK="+dirs.Work,
		"GLOVEBOX_INPUT="+dirs.Input,
		"GLOVEBOX_OUTPUT="+dirs.Output,
		"GLOVEBOX_SESSION="+id,
	)
}

// mergeEnv returns base with over's variables in place of base's of the
// same name (a C program's getenv finds the first): the proxy's CA bundle
// replaces the image's SSL_CERT_FILE, for example.
func mergeEnv(base, over []string) []string {
	if len(over) == 0 {
		return base
	}
	names := map[string]bool{}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		names[k] = true
	}
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !names[k] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

// dirSet is a session's directories.
type dirSet struct{ Work, Input, Output string }

func (d dirSet) list() []string {
	var out []string
	for _, p := range []string{d.Work, d.Input, d.Output} {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// passedEnv are the kit's own variables agents also get: what finds
// programs, speaks the user's language and trusts the image's CAs. Nothing
// secret.
var passedEnv = []string{
	"PATH", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "TZ", "TERM",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NIX_SSL_CERT_FILE", "FONTCONFIG_FILE", "LOCALE_ARCHIVE",
}

// diskUsage adds up the bytes of the regular files under dirs, not
// following symbolic links.
func diskUsage(dirs []string) int64 {
	var total int64
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if e.Type().IsRegular() {
				if info, err := e.Info(); err == nil {
					total += info.Size()
				}
			}
			return nil
		})
	}
	return total
}

// checkDisk fails when the session's directories hold more than
// limits.disk.
func (ss *session) checkDisk() error {
	limit := ss.srv.diskLimit
	if limit <= 0 || ss.workspace.info == nil {
		return nil
	}
	used := diskUsage(dirSet(ss.workspace.info.Dirs).list())
	if used <= limit {
		return nil
	}
	return codeErr(protocol.CodeLimit, fmt.Errorf("the session's directories hold %s, over limits.disk (%s): delete files (or /clear-workspace) before the next prompt", protocol.FormatSize(used), protocol.FormatSize(limit)))
}
