package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/glovebox-dev/glovebox/protocol"
)

// UploadOptions are an upload's optional parts.
type UploadOptions struct {
	// Mime is the file's media type; empty lets the box guess from the name.
	Mime string
	// Progress, when set, is called from the uploading goroutine as bytes
	// are read from the reader: sent so far, of size.
	Progress func(sent, size int64)
	// Retries bounds how often UploadAt resumes an interrupted upload
	// (default 5).
	Retries int
}

// Upload streams size bytes from r to the box's file store (PUT
// /uploads/{name}) and returns the stored file's server FileRef, to pass
// to a prompt in PromptOptions.Inputs. Nothing is held in memory, so it
// suits files too big for an inline input. The box refuses a file over
// its limits.max_input before reading it; an upload that fails part way
// leaves nothing on the box and may be sent again. r must yield exactly
// size bytes. The key, or a token with the upload scope, authorises it.
func (b *Box) Upload(ctx context.Context, name string, r io.Reader, size int64, opts UploadOptions) (protocol.FileRef, error) {
	if name == "" {
		return protocol.FileRef{}, errors.New("upload: empty name")
	}
	if size < 0 {
		return protocol.FileRef{}, fmt.Errorf("upload %s: negative size %d", name, size)
	}
	u := b.base.ResolveReference(&url.URL{Path: protocol.UploadPath[1:] + name})
	body := io.Reader(&sizedReader{r: r, left: size, size: size, progress: opts.Progress})
	if size == 0 {
		body = http.NoBody
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.String(), body)
	if err != nil {
		return protocol.FileRef{}, fmt.Errorf("upload %s: %w", name, err)
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+b.ep.Key)
	if opts.Mime != "" {
		req.Header.Set("Content-Type", opts.Mime)
	}
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return protocol.FileRef{}, fmt.Errorf("box %q: upload %s: %w", b.name, name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		if resp.StatusCode == http.StatusNotFound {
			return protocol.FileRef{}, fmt.Errorf("box %q: upload %s: the box has no upload route (an older kit): send the file inline or as a url input", b.name, name)
		}
		return protocol.FileRef{}, statusError(fmt.Sprintf("box %q: upload %s", b.name, name), resp)
	}
	var ref protocol.FileRef
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ref); err != nil {
		return protocol.FileRef{}, fmt.Errorf("box %q: upload %s: the answer is not a FileRef: %w", b.name, name, err)
	}
	if ref.Kind != protocol.KindServer || ref.ID == "" {
		return protocol.FileRef{}, fmt.Errorf("box %q: upload %s: the box answered a %q ref without an id", b.name, name, ref.Kind)
	}
	return ref, nil
}

// sizedReader reads at most size bytes, fails when r ends short, and
// reports progress.
type sizedReader struct {
	r          io.Reader
	left, size int64
	progress   func(sent, size int64)
}

func (s *sizedReader) Read(p []byte) (int, error) {
	if s.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	if n > 0 && s.progress != nil {
		s.progress(s.size-s.left, s.size)
	}
	if errors.Is(err, io.EOF) && s.left > 0 {
		return n, fmt.Errorf("upload: the reader ended %d bytes short of the %d announced", s.left, s.size)
	}
	if s.left == 0 && err == nil {
		err = io.EOF
	}
	return n, err
}
