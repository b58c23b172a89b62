package protocol

import "strings"

// addFunc adds one problem to what Manifest.Check reports.
type addFunc func(format string, args ...any)

// checkEnv adds the problems of the manifest's env: names that are not
// variable names, and injections that are not secrets or do not check.
func checkEnv(env map[string]EnvSpec, add addFunc) {
	for _, k := range sortedKeys(env) {
		if !envNameRE.MatchString(k) {
			add("manifest: env %q is not a valid variable name (letters, digits and _, not starting with a digit)", k)
		}
		if in := env[k].Inject; in != nil {
			if !env[k].Secret {
				add("manifest: env.%s.inject needs secret = true", k)
			}
			if err := in.Check(); err != nil {
				for _, e := range strings.Split(err.Error(), "\n") {
					add("manifest: env.%s.inject.%s", k, e)
				}
			}
		}
	}
}

// check adds the problems of the limits Manifest.Check looks at together:
// memory and disk quantities, message and input sizes, the connection
// count, and the timeouts.
func (l Limits) check(add addFunc) {
	for _, f := range []struct{ name, v string }{{"limits.memory", l.Memory}, {"limits.disk", l.Disk}} {
		if f.v != "" {
			if _, err := ParseQuantity(f.v); err != nil {
				add("manifest: %s: %v", f.name, err)
			}
		}
	}
	for _, f := range []struct{ name, v string }{{"limits.max_message", l.MaxMessage}, {"limits.max_input", l.MaxInput}, {"limits.frame_budget", l.FrameBudget}} {
		if f.v != "" {
			if _, err := ParseSize(f.v); err != nil {
				add("manifest: %s: %v", f.name, err)
			}
		}
	}
	if l.MaxConnections < 0 {
		add("manifest: limits.max_connections: %d is negative: want a count of connections, or 0 for the default", l.MaxConnections)
	}
	for _, f := range []struct{ name, v string }{{"limits.timeout", l.Timeout}, {"limits.input_timeout", l.InputTimeout}} {
		if f.v != "" {
			if _, err := ParseDuration(f.v); err != nil {
				add("manifest: %s: %v", f.name, err)
			}
		}
	}
}

// check adds the problems of the agent: a type it is not, a command where
// its type takes none or none where it needs one, env names that are not
// variable names.
func (a *AgentSpec) check(add addFunc) {
	switch a.Type {
	case AgentExec, AgentGo:
		if len(a.Command) > 0 {
			add("manifest: agent.command is only for agent type %q", AgentACP)
		}
	case AgentACP:
		if len(a.Command) == 0 || strings.TrimSpace(a.Command[0]) == "" {
			add("manifest: agent type %q needs a command, e.g. [\"npx\", \"my-agent\"]", AgentACP)
		}
	default:
		add("manifest: agent.type %q is not one of exec, acp, go", a.Type)
	}
	for _, k := range sortedKeys(a.Env) {
		if !envNameRE.MatchString(k) {
			add("manifest: agent.env %q is not a valid variable name", k)
		}
	}
}

// check adds the problems of [sessions]: durations that do not parse,
// negative counts.
func (s *SessionsSpec) check(add addFunc) {
	if s.ResumeGrace != "" {
		if _, err := ParseDuration(s.ResumeGrace); err != nil {
			add("manifest: sessions.resume_grace: %v", err)
		}
	}
	if s.Drain != "" {
		if _, err := ParseDuration(s.Drain); err != nil {
			add("manifest: sessions.drain: %v", err)
		}
	}
	if s.Pause != "" && s.Pause != "off" {
		if d, err := ParseDuration(s.Pause); err != nil {
			add("manifest: sessions.pause: %v (a duration, or \"off\")", err)
		} else if d <= 0 {
			add("manifest: sessions.pause: %q is not a positive duration (\"off\" never pauses)", s.Pause)
		}
	}
	if s.Lifetime != "" {
		if d, err := ParseDuration(s.Lifetime); err != nil {
			add("manifest: sessions.lifetime: %v", err)
		} else if d <= 0 {
			add("manifest: sessions.lifetime: %q is not a positive duration", s.Lifetime)
		}
	}
	if s.Max < 0 || s.MaxQueue < 0 {
		add("manifest: sessions.max and sessions.max_queue must not be negative")
	}
}
