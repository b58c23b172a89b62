package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Sessions lists the box's live sessions (GET /sessions; the key or an
// admin token).
func (b *Box) Sessions(ctx context.Context) (*protocol.SessionList, error) {
	var l protocol.SessionList
	if err := b.getJSON(ctx, "sessions", true, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// Files lists the files parked on the box (GET /files; the key, an admin
// token or a files token without a file limit).
func (b *Box) Files(ctx context.Context) (*protocol.FileList, error) {
	var l protocol.FileList
	if err := b.getJSON(ctx, "files", true, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// RemoveFile deletes a parked file (DELETE /files/{id}).
func (b *Box) RemoveFile(ctx context.Context, id string) error {
	if !fileIDRE.MatchString(id) {
		return fmt.Errorf("file id %q: want letters, digits, _ and - only", id)
	}
	if _, ok := ctx.Deadline(); !ok && b.opts.requestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.requestTimeout)
		defer cancel()
	}
	u := b.route("files/" + id)
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u.String(), nil)
	if err != nil {
		return fmt.Errorf("remove file %s: %w", id, err)
	}
	req.Header.Set("Authorization", "Bearer "+b.ep.Key)
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("box %q: remove file %s: %w", b.name, id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return statusError(fmt.Sprintf("box %q: remove file %s", b.name, id), resp)
	}
	return nil
}

// LogOptions choose what Logs reads.
type LogOptions struct {
	// Since keeps the records logged at or after it; zero is every record
	// the box keeps.
	Since time.Time
	// Follow keeps reading new records as the box logs them, until ctx
	// ends or the box closes.
	Follow bool
}

// Logs reads the box's log records (GET /logs; the key, or a token with
// the logs or admin scope), each a JSON object as the kit's slog writes
// it. The sequence ends at the last record (or, with Follow, when ctx ends
// or the box closes); a failure is its last element.
func (b *Box) Logs(ctx context.Context, o LogOptions) iter.Seq2[json.RawMessage, error] {
	return func(yield func(json.RawMessage, error) bool) {
		u := b.route("logs")
		q := url.Values{}
		if !o.Since.IsZero() {
			q.Set("since", o.Since.UTC().Format(time.RFC3339Nano))
		}
		if o.Follow {
			q.Set("follow", "1")
		}
		u.RawQuery = q.Encode()
		err := b.jsonLines(ctx, u, "logs", func(line []byte) (bool, error) {
			if !json.Valid(line) {
				return false, fmt.Errorf("box %q: a log line is not JSON: %.80q", b.name, line)
			}
			return yield(append(json.RawMessage(nil), line...), nil), nil
		})
		if err != nil {
			yield(nil, err)
		}
	}
}

// jsonLines GETs u, a route that answers one JSON document a line (what
// names it in errors: "logs"), and hands each line to each until it says
// stop or fails. The line is valid only during the call. With a follow
// query, it reads until ctx ends (not an error) or the box closes.
func (b *Box) jsonLines(ctx context.Context, u *url.URL, what string, each func(line []byte) (bool, error)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Authorization", "Bearer "+b.ep.Key)
	resp, err := b.opts.httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("box %q: get %s: %w", b.name, what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statusError(fmt.Sprintf("box %q: get %s", b.name, what), resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		more, err := each(sc.Bytes())
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil && err != io.EOF {
		return fmt.Errorf("box %q: read %s: %w", b.name, what, err)
	}
	return nil
}
