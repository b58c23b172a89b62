package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

func TestRunRecords(t *testing.T) {
	url, _ := startKit(t, exec.New(), "")
	b := kitBox(t, url)
	ctx := testkit.Context(t, "run records")
	for _, p := range []string{"echo one", `printf abc > "$GLOVEBOX_OUTPUT/x.txt"`} {
		r, err := b.Prompt(ctx, p, client.PromptOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	chain, err := b.RunChain(ctx, client.RunOptions{})
	if err != nil || len(chain) != 2 {
		t.Fatalf("RunChain = %d records, %v; want 2 verified", len(chain), err)
	}
	first, err := chain[0].Run()
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := b.Run(ctx, first.Prompt, client.RunOptions{})
	if err != nil || rec.Seq != 1 || rec.Outcome != "complete" {
		t.Fatalf("Run(%s) = %+v, %v", first.Prompt, rec, err)
	}

	// Checked against another box's manifest key: refused.
	other := client.RunOptions{PublicKey: protocol.RunPublicKey(protocol.NewKey())}
	if _, _, err := b.Run(ctx, first.Prompt, other); err == nil || !strings.Contains(err.Error(), "another key") {
		t.Errorf("Run with another box's key = %v, want refused", err)
	}
	if _, err := b.RunChain(ctx, other); err == nil {
		t.Errorf("RunChain with another box's key verified")
	}
	if _, _, err := b.Run(ctx, "nosuchprompt", client.RunOptions{}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Run of an unknown prompt = %v, want a 404", err)
	}
	second, _ := chain[1].Run()
	if got := second.Outputs["x.txt"]; got.Size != 3 || got.SHA256 != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("the second record's output = %+v, want the digest of abc", got)
	}

	// A changed record: named.
	chain[1].Record = []byte(strings.Replace(string(chain[1].Record), `"size":3`, `"size":4`, 1))
	var ve *protocol.RunVerifyError
	if err := chain[1].Verify(mustKey(t, b)); !errors.As(err, &ve) || strings.Join(ve.Fields, ",") != "outputs/x.txt" {
		t.Errorf("a changed output size: Verify = %v, want outputs/x.txt named", err)
	}
}

func mustKey(t *testing.T, b *client.Box) []byte {
	t.Helper()
	env, err := b.Environment(testkit.Context(t, "environment"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := protocol.ParseRunPublicKey(env.Runs.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}
