package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// UploadAt uploads size bytes of r like Upload, but resumably: the box
// keeps what arrives, and when the connection fails part way UploadAt
// asks the box how much it holds and sends the rest, up to
// UploadOptions.Retries times (default 5), waiting a little longer each
// time. A box without resumable uploads (an older kit) gets one plain
// Upload. Use it for big files on networks that drop connections.
func (b *Box) UploadAt(ctx context.Context, name string, r io.ReaderAt, size int64, opts UploadOptions) (protocol.FileRef, error) {
	if name == "" {
		return protocol.FileRef{}, errors.New("upload: empty name")
	}
	if size < 0 {
		return protocol.FileRef{}, fmt.Errorf("upload %s: negative size %d", name, size)
	}
	retries := opts.Retries
	if retries == 0 {
		retries = 5
	}
	id, err := b.startUpload(ctx, name, size, opts.Mime)
	if errors.Is(err, errNoResumable) {
		return b.Upload(ctx, name, io.NewSectionReader(r, 0, size), size, opts)
	}
	if err != nil {
		return protocol.FileRef{}, err
	}
	u := b.base.ResolveReference(&url.URL{Path: protocol.UploadPath[1:] + id})
	var off int64
	for attempt := 0; ; attempt++ {
		ref, done, next, err := b.patchUpload(ctx, u, r, off, size, opts.Progress)
		if done {
			return ref, nil
		}
		if err == nil {
			off = next
			continue
		}
		var pe *permanentError
		if ctx.Err() != nil || attempt >= retries || errors.As(err, &pe) {
			return protocol.FileRef{}, fmt.Errorf("box %q: upload %s: %w (after %d attempts)", b.name, name, err, attempt+1)
		}
		b.log.Debug("upload interrupted; resuming", "name", name, "err", err)
		select {
		case <-time.After(time.Duration(attempt+1) * 500 * time.Millisecond):
		case <-ctx.Done():
			return protocol.FileRef{}, ctx.Err()
		}
		if off, err = b.uploadOffset(ctx, u); err != nil {
			return protocol.FileRef{}, fmt.Errorf("box %q: upload %s: %w", b.name, name, err)
		}
	}
}

var errNoResumable = errors.New("client: the box has no resumable uploads")

func (b *Box) uploadRequest(ctx context.Context, method string, u *url.URL, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.ep.Key)
	return req, nil
}

func (b *Box) startUpload(ctx context.Context, name string, size int64, mime string) (string, error) {
	req, err := b.uploadRequest(ctx, http.MethodPost, b.base.ResolveReference(&url.URL{Path: protocol.UploadPath[1:] + name}), nil)
	if err != nil {
		return "", fmt.Errorf("upload %s: %w", name, err)
	}
	req.Header.Set("Upload-Length", strconv.FormatInt(size, 10))
	if mime != "" {
		req.Header.Set("Content-Type", mime)
	}
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("box %q: upload %s: %w", b.name, name, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusCreated:
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return "", errNoResumable
	default:
		return "", statusError(fmt.Sprintf("box %q: upload %s", b.name, name), resp)
	}
	var s struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&s); err != nil || s.ID == "" {
		return "", fmt.Errorf("box %q: upload %s: the box answered no upload id", b.name, name)
	}
	return s.ID, nil
}

// patchUpload sends the bytes from off; done with the ref once the box
// holds them all, else the box's new offset.
func (b *Box) patchUpload(ctx context.Context, u *url.URL, r io.ReaderAt, off, size int64, progress func(int64, int64)) (ref protocol.FileRef, done bool, next int64, err error) {
	body := io.Reader(&sizedReader{r: io.NewSectionReader(r, off, size-off), left: size - off, size: size - off, progress: func(sent, _ int64) {
		if progress != nil {
			progress(off+sent, size)
		}
	}})
	if size == off {
		body = http.NoBody
	}
	req, err := b.uploadRequest(ctx, http.MethodPatch, u, body)
	if err != nil {
		return ref, false, off, err
	}
	req.ContentLength = size - off
	req.Header.Set("Upload-Offset", strconv.FormatInt(off, 10))
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return ref, false, off, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusCreated:
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ref); err != nil || ref.ID == "" {
			return ref, false, off, fmt.Errorf("the answer is not a FileRef: %v", err)
		}
		return ref, true, size, nil
	case http.StatusNoContent:
		n, err := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
		if err != nil || n <= off {
			return ref, false, off, fmt.Errorf("the box holds %q bytes after a PATCH from %d", resp.Header.Get("Upload-Offset"), off)
		}
		return ref, false, n, nil
	case http.StatusConflict, http.StatusBadRequest:
		return ref, false, off, statusError("patch", resp) // HEAD tells where to go on
	default:
		return ref, false, off, &permanentError{statusError("patch", resp)}
	}
}

// permanentError is an answer that another attempt would not change.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func (b *Box) uploadOffset(ctx context.Context, u *url.URL) (int64, error) {
	req, err := b.uploadRequest(ctx, http.MethodHead, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return 0, fmt.Errorf("HEAD %s: HTTP %s (the box no longer holds the upload: start again)", u.Path, resp.Status)
	}
	return strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
}
