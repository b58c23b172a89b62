package protocol_test

import (
	"fmt"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

func ExampleVerifyPreviewLink() {
	key := protocol.NewKey()
	exp := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	link, err := protocol.MintPreviewLink(key, protocol.PreviewClaims{ID: "k3v9q2abcdefgh", Session: "s1", Port: 5173, Expires: exp})
	if err != nil {
		panic(err)
	}
	// The box checks the signature first; the claims say which session's
	// port the link opens and until when (an expired link still verifies:
	// the box answers 410 for it).
	c, err := protocol.VerifyPreviewLink(key, link)
	fmt.Println(err, c.Session, c.Port, c.Expires.Format(time.RFC3339))
	_, err = protocol.VerifyPreviewLink(protocol.NewKey(), link)
	fmt.Println(err != nil)
	// Output:
	// <nil> s1 5173 2030-01-01T00:00:00Z
	// true
}
