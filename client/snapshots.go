package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Snapshots (protocol/snapshot.go): a session's directories stored on the
// box, restored as a new session, or copied into new sessions (fork). A
// restored or forked session waits, detached, for a client to Attach to
// it within the box's resume grace.

// Snapshot snapshots this Box's session (POST /sessions/{id}/snapshot):
// the session must have been opened (a prompt sent, or Attach).
func (b *Box) Snapshot(ctx context.Context) (*protocol.SnapshotInfo, error) {
	id := b.SessionID()
	if id == "" {
		return nil, fmt.Errorf("box %q: snapshot: no session yet (send a prompt first, or use SnapshotSession)", b.name)
	}
	return b.SnapshotSession(ctx, id)
}

// SnapshotSession snapshots the session id (the key, a snapshots or admin
// token, or the session's own credential).
func (b *Box) SnapshotSession(ctx context.Context, id string) (*protocol.SnapshotInfo, error) {
	var info protocol.SnapshotInfo
	if err := b.do(ctx, http.MethodPost, "sessions/"+neturl.PathEscape(id)+"/snapshot", nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// Snapshots lists the box's snapshots, newest first (GET /snapshots).
func (b *Box) Snapshots(ctx context.Context) (*protocol.SnapshotList, error) {
	var l protocol.SnapshotList
	if err := b.getJSON(ctx, "snapshots", true, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// SnapshotManifest returns a snapshot's manifest (GET /snapshots/{id}).
func (b *Box) SnapshotManifest(ctx context.Context, id string) (*protocol.SnapshotManifest, error) {
	if !protocol.ValidSnapshotID(id) {
		return nil, fmt.Errorf("snapshot %q: a snapshot id is 64 hex digits", id)
	}
	var m protocol.SnapshotManifest
	if err := b.getJSON(ctx, "snapshots/"+id, true, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// DeleteSnapshot removes a snapshot (DELETE /snapshots/{id}).
func (b *Box) DeleteSnapshot(ctx context.Context, id string) error {
	if !protocol.ValidSnapshotID(id) {
		return fmt.Errorf("snapshot %q: a snapshot id is 64 hex digits", id)
	}
	return b.do(ctx, http.MethodDelete, "snapshots/"+id, nil, nil)
}

// Restore makes a new session from a snapshot (POST
// /snapshots/{id}/restore). A snapshot of another image is refused
// unless force. Attach a Box to the result's session to use it.
func (b *Box) Restore(ctx context.Context, id string, force bool) (*protocol.RestoreResult, error) {
	if !protocol.ValidSnapshotID(id) {
		return nil, fmt.Errorf("snapshot %q: a snapshot id is 64 hex digits", id)
	}
	var res protocol.RestoreResult
	if err := b.do(ctx, http.MethodPost, "snapshots/"+id+"/restore", protocol.RestoreRequest{Force: force}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Fork copies the session id into n new sessions (POST
// /sessions/{id}/fork). Attach a Box to each to use it.
func (b *Box) Fork(ctx context.Context, id string, n int) (*protocol.ForkResult, error) {
	var res protocol.ForkResult
	if err := b.do(ctx, http.MethodPost, "sessions/"+neturl.PathEscape(id)+"/fork", protocol.ForkRequest{Count: n}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Attach makes this Box's first connection attach to the session id (a
// restored or forked one, waiting detached) instead of opening a new
// session. It fails once the Box has a session.
func (b *Box) Attach(id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.session != "" || b.conn != nil || b.connecting != nil {
		return fmt.Errorf("box %q: attach %s: this Box has a session already (%s): use a new Client", b.name, id, b.session)
	}
	if id == "" {
		return errors.New("attach: no session id")
	}
	b.session, b.lastSeq, b.attach = id, 0, true
	return nil
}

// do sends method route with body as JSON and decodes a 2xx answer into
// out (when not nil).
func (b *Box) do(ctx context.Context, method, route string, body, out any) error {
	if _, ok := ctx.Deadline(); !ok && b.opts.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.requestTimeout)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		bb, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(bb)
	}
	u := b.route(route)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, route, err)
	}
	req.Header.Set("Authorization", "Bearer "+b.ep.Key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("box %q: %s %s: %w", b.name, method, route, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return statusError(fmt.Sprintf("box %q: %s %s", b.name, method, route), resp)
	}
	if out == nil {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("box %q: read %s: %w", b.name, route, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("box %q: %s %s is not the JSON expected: %w", b.name, method, route, err)
	}
	return nil
}
