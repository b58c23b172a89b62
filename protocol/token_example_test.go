package protocol_test

import (
	"fmt"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

func ExampleMintToken() {
	key := protocol.NewKey()
	now := time.Now()
	tok, err := protocol.MintToken(key, protocol.TokenClaims{
		Scopes:  []string{protocol.ScopeFiles},
		Expires: now.Add(15 * time.Minute),
		Files:   []string{"f_7Qx2"},
	})
	if err != nil {
		panic(err)
	}
	// The box verifies it with the same key.
	c, err := protocol.VerifyToken(key, tok, now)
	fmt.Println(err, c.AllowsFile("f_7Qx2"), c.AllowsFile("f_other"), c.Allows(protocol.ScopeConnect))
	_, err = protocol.VerifyToken(key, tok, now.Add(time.Hour))
	fmt.Println(err != nil)
	// Output:
	// <nil> true false false
	// true
}
