package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// TestRuns: gbx runs get saves a box's records, and gbx runs verify checks
// them with the manifest's key, naming a changed field, a broken link and
// another box's key.
func TestRuns(t *testing.T) {
	t.Parallel()
	url, key := testBox(t, `{"name":"t"}`)
	env := boxEnv(url, key)
	c, err := client.New(map[string]client.Endpoint{"b": {URL: url, Key: key}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := c.Box("b")
	ctx := testkit.Context(t, "the prompts")
	for _, text := range []string{"echo one", "echo two", "echo three"} {
		r, err := b.Prompt(ctx, text, client.PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	session := b.SessionID()
	dir := t.TempDir()
	manifest := filepath.Join(dir, "glovebox.json")
	os.WriteFile(manifest, []byte(`{"name":"t","runs":{"public_key":"`+protocol.RunPublicKey(key)+`"}}`), 0o644)
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"name":"t","runs":{"public_key":"`+protocol.RunPublicKey(protocol.NewKey())+`"}}`), 0o644)

	stdout, stderr, err := runGbx(t, env, dir, "runs", "get", "--session", session, "--manifest", manifest)
	if err != nil || !strings.Contains(stderr, "verified: 3 records") {
		t.Fatalf("gbx runs get --session = %v, stderr %q", err, stderr)
	}
	os.WriteFile(filepath.Join(dir, "chain.json"), []byte(stdout), 0o644)
	if out, _, err := runGbx(t, nil, dir, "runs", "verify", "chain.json", "--manifest", "glovebox.json"); err != nil || !strings.Contains(out, "verified: 3 records of session "+session) {
		t.Errorf("gbx runs verify chain.json = %v, %q", err, out)
	}
	if out, _, err := runGbx(t, env, dir, "runs", "verify", "--session", session); err != nil || !strings.Contains(out, "verified: 3 records") {
		t.Errorf("gbx runs verify --session (the box's own key) = %v, %q", err, out)
	}

	var chain protocol.RunChain
	if err := json.Unmarshal([]byte(stdout), &chain); err != nil {
		t.Fatal(err)
	}
	first, _ := chain.Records[0].Run()
	if out, _, err := runGbx(t, env, dir, "runs", "verify", first.Prompt, "--public-key", protocol.RunPublicKey(key)); err != nil || !strings.Contains(out, "verified: record 1 of session") {
		t.Errorf("gbx runs verify PROMPT = %v, %q", err, out)
	}

	// Refused, each saying what.
	changed := strings.Replace(stdout, first.PromptDigest, strings.Repeat("0", 64), 1)
	dropped := chain
	dropped.Records = []protocol.SignedRun{chain.Records[0], chain.Records[2]}
	for _, tc := range []struct {
		name, file, body, manifest, want string
	}{
		{"a changed field", "changed.json", changed, "glovebox.json", "prompt_digest"},
		{"a dropped record", "dropped.json", string(must(json.Marshal(dropped))), "glovebox.json", "run chain broken at record 2"},
		{"another box's manifest", "chain.json", stdout, "other.json", "another key"},
	} {
		os.WriteFile(filepath.Join(dir, tc.file), []byte(tc.body), 0o644)
		if _, _, err := runGbx(t, nil, dir, "runs", "verify", tc.file, "--manifest", tc.manifest); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: gbx runs verify = %v, want it refused naming %q", tc.name, err, tc.want)
		}
	}
	if _, _, err := runGbx(t, nil, dir, "runs", "verify", "chain.json"); err == nil || !strings.Contains(err.Error(), "--manifest") {
		t.Errorf("verify FILE without a key = %v, want a usage error", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
