package protocol_test

import (
	"errors"
	"fmt"

	"github.com/glovebox-dev/glovebox/protocol"
)

func ExampleParseSize() {
	for _, s := range []string{"512", " 1.5 kb ", "1MB", "1MiB"} {
		n, err := protocol.ParseSize(s)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		fmt.Println(n)
	}
	// Output:
	// 512
	// 1536
	// 1048576
	// error: size "1MiB" has unit "MiB": want B, KB, MB or GB (1024-based)
}

func ExampleFingerprint() {
	fmt.Println(protocol.Fingerprint("test-key"))
	// Output: 62af8704...b0ef
}

func ExampleEncode() {
	b, err := protocol.Encode(&protocol.Complete{
		ID:      "req_1",
		Message: "Done.",
		Outputs: map[string]protocol.FileRef{
			"a.txt": protocol.InlineRef("a.txt", protocol.GuessMime("a.txt"), []byte("hi there")),
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	// Output: {"type":"complete","id":"req_1","message":"Done.","outputs":{"a.txt":{"kind":"inline","name":"a.txt","mime":"text/plain","data":"aGkgdGhlcmU="}}}
}

func ExampleDecodeClient() {
	frames := []string{
		`{"type":"prompt","id":"req_1","text":"ls","inputs":{}}`,
		`{"type":"prompt","id":"req_2","text":42}`,
		`{"type":"teleport"}`,
	}
	for _, f := range frames {
		m, err := protocol.DecodeClient([]byte(f))
		switch {
		case errors.Is(err, protocol.ErrUnknownType):
			fmt.Println("ignored:", err)
		case err != nil:
			fmt.Printf("error for %q: %v\n", protocol.PeekID([]byte(f)), err)
		default:
			p := m.(*protocol.Prompt)
			fmt.Printf("prompt %s: %s\n", p.ID, p.Text)
		}
	}
	// Output:
	// prompt req_1: ls
	// error for "req_2": protocol: bad message: prompt: "text" must be a string
	// ignored: protocol: unknown message type "teleport"
}
