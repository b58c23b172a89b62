package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

func TestToken(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t"}`)
	dir := t.TempDir()
	mint := func(t *testing.T, env map[string]string, args ...string) string {
		t.Helper()
		stdout, stderr, err := runGbx(t, env, dir, append([]string{"token"}, args...)...)
		if err != nil {
			t.Fatalf("gbx token %v: %v\n%s", args, err, stderr)
		}
		if !strings.Contains(stderr, protocol.Fingerprint(key)) {
			t.Errorf("gbx token stderr = %q, want the key's fingerprint", stderr)
		}
		return strings.TrimSpace(stdout)
	}

	t.Run("defaults", func(t *testing.T) {
		before := time.Now()
		tok := mint(t, map[string]string{"GLOVEBOX_KEY": key})
		c, err := protocol.VerifyToken(key, tok, time.Now())
		if err != nil {
			t.Fatalf("VerifyToken: %v", err)
		}
		if strings.Join(c.Scopes, ",") != "connect" || len(c.Files) != 0 {
			t.Errorf("claims = %+v, want connect only", c)
		}
		if exp := before.Add(15 * time.Minute); c.Expires.Before(exp.Add(-time.Second)) || c.Expires.After(exp.Add(5*time.Second)) {
			t.Errorf("expires %v, want about %v", c.Expires, exp)
		}
	})

	t.Run("scopes, files, ttl, --box", func(t *testing.T) {
		cfg := t.TempDir()
		os.MkdirAll(filepath.Join(cfg, "glovebox"), 0o755)
		os.WriteFile(filepath.Join(cfg, "glovebox", "endpoints.json"), []byte(`{"b":{"url":"`+url+`","key_env":"BKEY"}}`), 0o600)
		tok := mint(t, map[string]string{"XDG_CONFIG_HOME": cfg, "BKEY": key}, "--box", "b", "--ttl", "2h", "--file", "f_1", "--file", "f_2")
		c, err := protocol.VerifyToken(key, tok, time.Now().Add(119*time.Minute))
		if err != nil {
			t.Fatalf("VerifyToken: %v", err)
		}
		if strings.Join(c.Scopes, ",") != "files" || strings.Join(c.Files, ",") != "f_1,f_2" {
			t.Errorf("claims = %+v, want files f_1,f_2", c)
		}
		tok = mint(t, nil, "--key", key, "--scope", "environment,connect")
		if c, err := protocol.VerifyToken(key, tok, time.Now()); err != nil || strings.Join(c.Scopes, ",") != "environment,connect" {
			t.Errorf("--scope environment,connect: %+v, %v", c, err)
		}
	})

	t.Run("usage errors", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--scope", "root"}, `unknown scope "root"`},
			{[]string{"--ttl", "0s"}, "--ttl"},
			{[]string{"--ttl", "-1m"}, "--ttl"},
			{[]string{"--ttl", "1000h"}, "--ttl"},
			{[]string{"--scope", "connect", "--file", "f_1"}, "without"},
			{[]string{"extra"}, "no arguments"},
		} {
			_, _, err := runGbx(t, map[string]string{"GLOVEBOX_KEY": key}, dir, append([]string{"token"}, tc.args...)...)
			if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("gbx token %v = %v, want a usage error containing %q", tc.args, err, tc.want)
			}
		}
		if _, _, err := runGbx(t, nil, dir, "token"); err == nil || !strings.Contains(err.Error(), "which key") {
			t.Errorf("gbx token without a key = %v, want which key", err)
		}
	})

	// The client takes a token where it takes the key.
	t.Run("client with a token", func(t *testing.T) {
		tok := mint(t, map[string]string{"GLOVEBOX_KEY": key}, "--scope", "connect,environment")
		stdout, stderr, err := runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": tok}, dir, "prompt", "echo via token")
		if err != nil || !strings.Contains(stdout, "via token") {
			t.Fatalf("prompt with a token: %v\n%s%s", err, stdout, stderr)
		}
		c, err := client.New(map[string]client.Endpoint{"b": {URL: url, Key: tok}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b, _ := c.Box("b")
		env, err := b.Environment(t.Context())
		if err != nil {
			t.Fatalf("Environment with a token: %v", err)
		}
		if !strings.Contains(strings.Join(env.Capabilities, ","), protocol.CapTokens) {
			t.Errorf("capabilities = %v, want %s", env.Capabilities, protocol.CapTokens)
		}
		// A connect-only token does not read the environment.
		tok = mint(t, map[string]string{"GLOVEBOX_KEY": key})
		_, stderr, err = runGbx(t, map[string]string{"GLOVEBOX_URL": url, "GLOVEBOX_KEY": tok}, dir, "env")
		if err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			t.Errorf("env with a connect token = %v (%s), want a 401", err, stderr)
		}
	})
}
