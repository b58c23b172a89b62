package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Preview mints a link to port in session id (the box's CapPreview;
// POST /sessions/{id}/previews with the key, a preview token or the
// session's own connect token): a browser opens the returned URL, an API
// client sends Link as a bearer to the URL's origin. ttl 0 is the box's
// default (an hour).
func (b *Box) Preview(ctx context.Context, id string, port int, ttl time.Duration) (*protocol.Preview, error) {
	req := protocol.PreviewRequest{Port: port}
	if ttl > 0 {
		req.TTL = fmt.Sprintf("%ds", int64((ttl+time.Second-1)/time.Second))
	}
	body, _ := json.Marshal(req)
	var p protocol.Preview
	if err := b.previewCall(ctx, http.MethodPost, id, "", body, http.StatusCreated, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Previews lists session id's live preview links (without their
// credentials).
func (b *Box) Previews(ctx context.Context, id string) ([]protocol.Preview, error) {
	var l protocol.PreviewList
	if err := b.previewCall(ctx, http.MethodGet, id, "", nil, http.StatusOK, &l); err != nil {
		return nil, err
	}
	return l.Previews, nil
}

// RevokePreview revokes session id's link linkID: it answers 410 Gone
// from then on.
func (b *Box) RevokePreview(ctx context.Context, id, linkID string) error {
	if !protocol.ValidPreviewID(linkID) {
		return fmt.Errorf("preview link id %q: want the id Previews lists", linkID)
	}
	return b.previewCall(ctx, http.MethodDelete, id, "/"+linkID, nil, http.StatusNoContent, nil)
}

func (b *Box) previewCall(ctx context.Context, method, id, rest string, body []byte, want int, v any) error {
	if id == "" || strings.ContainsAny(id, "/?#%") {
		return fmt.Errorf("session id %q: want the id GET /sessions lists", id)
	}
	if _, ok := ctx.Deadline(); !ok && b.opts.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.requestTimeout)
		defer cancel()
	}
	route := "sessions/" + id + "/previews" + rest
	u := b.route(route)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: %w", route, err)
	}
	req.Header.Set("Authorization", "Bearer "+b.ep.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("box %q: %s %s: %w", b.name, strings.ToLower(method), route, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return statusError(fmt.Sprintf("box %q: %s %s", b.name, strings.ToLower(method), u.Redacted()), resp)
	}
	if v == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v); err != nil {
		return fmt.Errorf("box %q: %s is not the JSON expected: %w", b.name, route, err)
	}
	return nil
}
