package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/glovebox-dev/glovebox/client"
	"github.com/glovebox-dev/glovebox/protocol"
)

// uploadAbove is the size over which gbx prompt --file streams a file to
// the box's store (resumably: POST and PATCH /uploads/) and sends a server ref, instead of
// inlining it in the prompt frame (base64, held in memory on both sides).
const uploadAbove = 8 << 20

// bigInput is a --file input too big to inline.
type bigInput struct {
	name, path string
	size       int64
}

// uploadInputs uploads the big inputs, with a progress bar each, and
// returns their refs by name.
func uploadInputs(ctx context.Context, stdio IO, b *client.Box, big []bigInput) (map[string]protocol.FileRef, error) {
	if len(big) == 0 {
		return nil, nil
	}
	refs := make(map[string]protocol.FileRef, len(big))
	for _, in := range big {
		ref, err := uploadFile(ctx, stdio, b, in)
		if err != nil {
			return nil, err
		}
		refs[in.name] = ref
	}
	return refs, nil
}

func uploadFile(ctx context.Context, stdio IO, b *client.Box, in bigInput) (protocol.FileRef, error) {
	f, err := os.Open(in.path)
	if err != nil {
		return protocol.FileRef{}, fmt.Errorf("--file %s: %w", in.path, err)
	}
	defer f.Close()
	bar := newProgress(stdio, "upload "+in.name, in.size)
	ref, err := b.UploadAt(ctx, in.name, f, in.size, client.UploadOptions{
		Mime:     protocol.GuessMime(in.name),
		Progress: func(sent, _ int64) { bar.set(sent) },
	})
	bar.done()
	if err != nil {
		return protocol.FileRef{}, fmt.Errorf("--file %s: %w", in.path, err)
	}
	return ref, nil
}
