package storage_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// The kit parks outputs through the registry: the default outputs policy
// sends small files inline and files of 1MB and more to the box's file
// store, which serves them at /files/{id} until their TTL passes.
func ExampleRegistry_Store() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "glovebox-example")
	defer os.RemoveAll(dir)

	local, err := storage.OpenLocal(ctx, filepath.Join(dir, "files"), filepath.Join(dir, "files.db"),
		storage.LocalOptions{PublicURL: "https://box.example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer local.Close()
	reg := storage.NewRegistry()
	reg.Register(protocol.AdapterLocalServer, local)
	policy := protocol.DefaultOutputsPolicy()
	if err := reg.ValidateOutputs(policy); err != nil {
		fmt.Println(err)
		return
	}

	small, _ := reg.Store(ctx, policy, storage.Meta{Name: "hello.txt", Size: 5}, strings.NewReader("hello"))
	fmt.Println(small.Kind, small.Mime, small.Data)

	big := strings.Repeat("x", 1<<20)
	parked, _ := reg.Store(ctx, policy, storage.Meta{Name: "big.txt", Size: int64(len(big))}, strings.NewReader(big))
	fmt.Println(parked.Kind, parked.Size, strings.HasPrefix(parked.URL, "https://box.example/files/"))

	rc, _ := reg.Open(ctx, parked, 0)
	n, _ := io.Copy(io.Discard, rc)
	rc.Close()
	fmt.Println(n)
	// Output:
	// inline text/plain aGVsbG8=
	// server 1048576 true
	// 1048576
}

func ExamplePick() {
	p := protocol.DefaultOutputsPolicy() // inline below 1MB, else localServer
	for _, size := range []int64{1<<20 - 1, 1 << 20} {
		r, err := storage.Pick(p, size, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(size, r.Use.Adapter)
	}
	// Output:
	// 1048575 inline
	// 1048576 localServer
}
