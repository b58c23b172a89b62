package client_test

import (
	"strings"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/kit/agent/exec"
	"github.com/glovebox-dev/glovebox/protocol"
)

// A token minted from the box key works as Endpoint.Key, for what its
// scopes allow.
func TestKitToken(t *testing.T) {
	t.Parallel()
	url, _ := startKit(t, exec.New(), "")
	mint := func(scopes ...string) string {
		tok, err := protocol.MintToken(testKey, protocol.TokenClaims{Scopes: scopes, Expires: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	open := func(tok string) *client.Box {
		c, err := client.New(map[string]client.Endpoint{"kit": {URL: url, Key: tok}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		b, err := c.Box("kit")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctx := testkit.Context(t, "the box's answers")

	b := open(mint(protocol.ScopeConnect, protocol.ScopeFiles))
	r, err := b.Prompt(ctx, `head -c 2097152 /dev/zero > "$GLOVEBOX_OUTPUT/big.bin"; echo ok`, client.PromptOptions{})
	if err != nil {
		t.Fatalf("Prompt with a token: %v", err)
	}
	done, err := r.Wait(ctx)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if done.Outputs["big.bin"].Kind != protocol.KindServer {
		t.Fatalf("outputs = %+v, want big.bin on the server", done.Outputs)
	}
	if got := readOutput(t, r, "big.bin"); len(got) != 2<<20 {
		t.Errorf("read big.bin with a files token: %d bytes", len(got))
	}
	if _, err := b.Environment(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Environment with a connect,files token = %v, want a 401", err)
	}

	b = open(mint(protocol.ScopeEnvironment))
	if _, err := b.Environment(ctx); err != nil {
		t.Errorf("Environment with an environment token: %v", err)
	}
	if _, err := b.Prompt(ctx, "echo no", client.PromptOptions{}); err == nil {
		t.Error("Prompt with an environment token succeeded")
	}
}
