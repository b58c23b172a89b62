package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// FS is a session's files on a box (/sessions/{id}/fs; capability "fs"):
// its work, input and output directories, read, written and watched as
// the session. Paths are as the session knows them, "work/notes.txt"
// (protocol.ParseFSPath), and checked here before they are sent.
// Credentials: the key, a workspace or admin token, or the credential
// that opened the session.
type FS struct {
	b       *Box
	session string
}

// FS returns the files of session; "" means this Box's current session
// (which then must have connected once).
func (b *Box) FS(session string) *FS { return &FS{b: b, session: session} }

// maxFSAnswer bounds a JSON answer: a listing page of at most 10,000
// entries.
const maxFSAnswer = 16 << 20

// url is the route of path (a session file path, or "" for the roots).
func (f *FS) url(p string, q url.Values) (*url.URL, error) {
	session := cmp.Or(f.session, f.b.SessionID())
	if session == "" {
		return nil, fmt.Errorf("box %q: files: no session given, and this Box has none yet", f.b.name)
	}
	elems := []string{"sessions", url.PathEscape(session), "fs"}
	if p != "" {
		root, rel, err := protocol.ParseFSPath(p)
		if err != nil {
			return nil, err
		}
		elems = append(elems, root)
		if rel != "" {
			for s := range strings.SplitSeq(rel, "/") {
				elems = append(elems, url.PathEscape(s))
			}
		}
	}
	// JoinPath takes escaped elements; ParseFSPath let no "." or ".."
	// through for it to clean away.
	u := f.b.base.JoinPath(elems...)
	u.RawQuery = q.Encode()
	return u, nil
}

// do sends a request and checks its status; the caller closes the body.
func (f *FS) do(ctx context.Context, method string, u *url.URL, what string, body io.Reader, size int64, h http.Header, ok ...int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if body != nil {
		req.ContentLength = size
		if size < 0 {
			req.ContentLength = -1
		}
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+f.b.ep.Key)
	resp, err := f.b.opts.httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("box %q: %s: %w", f.b.name, what, err)
	}
	for _, c := range ok {
		if resp.StatusCode == c {
			return resp, nil
		}
	}
	defer resp.Body.Close()
	return nil, statusError(fmt.Sprintf("box %q: %s", f.b.name, what), resp)
}

// small bounds a request that answers a small JSON body by the client's
// request timeout.
func (f *FS) small(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); !ok && f.b.opts.requestTimeout > 0 {
		return context.WithTimeout(ctx, f.b.opts.requestTimeout)
	}
	return ctx, func() {}
}

// jsonCall sends a request whose answer is JSON, decoded into v.
func (f *FS) jsonCall(ctx context.Context, method, p string, q url.Values, body []byte, what string, v any, ok ...int) error {
	ctx, cancel := f.small(ctx)
	defer cancel()
	u, err := f.url(p, q)
	if err != nil {
		return err
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	resp, err := f.do(ctx, method, u, what, r, int64(len(body)), nil, ok...)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if v == nil {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxFSAnswer+1))
	if err != nil {
		return fmt.Errorf("box %q: %s: %w", f.b.name, what, err)
	}
	if len(b) > maxFSAnswer {
		return fmt.Errorf("box %q: %s: the answer is over %d bytes", f.b.name, what, maxFSAnswer)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("box %q: %s: not the JSON expected: %w", f.b.name, what, err)
	}
	return nil
}

// ListOptions page a listing.
type ListOptions struct {
	// Limit is the most entries a page holds; 0 is the box's default
	// (1,000; at most 10,000).
	Limit int
	// After is a previous page's Next.
	After string
}

// List reads one page of a directory's entries, in the directory's order
// (GET .../fs/{dir}); path "" lists the session's roots.
func (f *FS) List(ctx context.Context, path string, o ListOptions) (*protocol.FSList, error) {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.After != "" {
		q.Set("after", o.After)
	}
	var l protocol.FSList
	if err := f.jsonCall(ctx, http.MethodGet, path, q, nil, "list "+path, &l, http.StatusOK); err != nil {
		return nil, err
	}
	return &l, nil
}

// ListAll reads every entry of a directory, page by page; a failure is
// the sequence's last element.
func (f *FS) ListAll(ctx context.Context, path string) iter.Seq2[protocol.FSEntry, error] {
	return func(yield func(protocol.FSEntry, error) bool) {
		o := ListOptions{Limit: 10000}
		for {
			l, err := f.List(ctx, path, o)
			if err != nil {
				yield(protocol.FSEntry{}, err)
				return
			}
			for _, e := range l.Entries {
				if !yield(e, nil) {
					return
				}
			}
			if l.Next == "" {
				return
			}
			o.After = l.Next
		}
	}
}

// Stat describes one file; a symbolic link is described, not followed
// (GET ...?stat=1).
func (f *FS) Stat(ctx context.Context, path string) (*protocol.FSEntry, error) {
	var e protocol.FSEntry
	if err := f.jsonCall(ctx, http.MethodGet, path, url.Values{"stat": {"1"}}, nil, "stat "+path, &e, http.StatusOK); err != nil {
		return nil, err
	}
	return &e, nil
}

// Open reads a file; n < 0 reads from off to the end. The body streams
// until ctx ends.
func (f *FS) Open(ctx context.Context, path string, off, n int64) (io.ReadCloser, error) {
	if _, rel, err := protocol.ParseFSPath(path); err != nil {
		return nil, err
	} else if rel == "" {
		return nil, fmt.Errorf("read %s: a session's directory: List it", path)
	}
	u, err := f.url(path, nil)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	want := []int{http.StatusOK}
	if off > 0 || n >= 0 {
		r := fmt.Sprintf("bytes=%d-", off)
		if n >= 0 {
			if n == 0 {
				return io.NopCloser(strings.NewReader("")), nil
			}
			r += strconv.FormatInt(off+n-1, 10)
		}
		h.Set("Range", r)
		want = []int{http.StatusPartialContent}
	}
	resp, err := f.do(ctx, http.MethodGet, u, "read "+path, nil, 0, h, want...)
	if err != nil {
		return nil, err
	}
	if resp.Header.Get("Content-Type") == "application/json" {
		resp.Body.Close()
		return nil, fmt.Errorf("read %s: a directory: List it", path)
	}
	return resp.Body, nil
}

// WriteOptions change how Write writes.
type WriteOptions struct {
	// Size is the body's length, or -1 (sent chunked). A known size lets
	// the box refuse an upload over limits.disk before it starts.
	Size int64
	// Append adds to the end of the file (made if missing) instead of
	// replacing it.
	Append bool
	// Parents makes missing directories on the way.
	Parents bool
}

// Write streams r into a file (PUT ...): into a temporary file beside it,
// renamed over it when whole, or appended. It answers the file's entry.
func (f *FS) Write(ctx context.Context, path string, r io.Reader, o WriteOptions) (*protocol.FSEntry, error) {
	q := url.Values{}
	if o.Append {
		q.Set("append", "1")
	}
	if o.Parents {
		q.Set("parents", "1")
	}
	u, err := f.url(path, q)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = strings.NewReader("")
		o.Size = 0
	}
	resp, err := f.do(ctx, http.MethodPut, u, "write "+path, io.NopCloser(r), o.Size, nil, http.StatusCreated)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var e protocol.FSEntry
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e); err != nil {
		return nil, fmt.Errorf("box %q: write %s: the answer is not the JSON expected: %w", f.b.name, path, err)
	}
	return &e, nil
}

// Mkdir makes a directory; with parents, missing ones on the way too, and
// an existing directory is no error.
func (f *FS) Mkdir(ctx context.Context, path string, parents bool) (*protocol.FSEntry, error) {
	body, _ := json.Marshal(protocol.FSOp{Parents: parents})
	var e protocol.FSEntry
	if err := f.jsonCall(ctx, http.MethodPost, path, url.Values{"op": {protocol.FSOpMkdir}}, body, "mkdir "+path, &e, http.StatusCreated, http.StatusOK); err != nil {
		return nil, err
	}
	return &e, nil
}

// Move renames a file or directory within a root; across roots (other
// mounts) a file is copied, then removed, and a directory is refused. A
// file at to is replaced.
func (f *FS) Move(ctx context.Context, from, to string) (*protocol.FSEntry, error) {
	if _, _, err := protocol.ParseFSPath(to); err != nil {
		return nil, err
	}
	body, _ := json.Marshal(protocol.FSOp{To: to})
	var e protocol.FSEntry
	if err := f.jsonCall(ctx, http.MethodPost, from, url.Values{"op": {protocol.FSOpMove}}, body, "move "+from, &e, http.StatusOK); err != nil {
		return nil, err
	}
	return &e, nil
}

// Remove deletes a file, a symbolic link or an empty directory; with
// recursive, a directory and everything beneath it.
func (f *FS) Remove(ctx context.Context, path string, recursive bool) error {
	q := url.Values{}
	if recursive {
		q.Set("recursive", "1")
	}
	return f.jsonCall(ctx, http.MethodDelete, path, q, nil, "remove "+path, nil, http.StatusNoContent)
}

// Watch reports what is created, written, removed and renamed beneath a
// directory, recursively, until ctx ends (not an error), the session ends
// or the directory goes; a failure is the sequence's last element. When
// the call returns, the box watches already.
func (f *FS) Watch(ctx context.Context, path string) (iter.Seq2[protocol.FSEvent, error], error) {
	u, err := f.url(path, url.Values{"watch": {"1"}})
	if err != nil {
		return nil, err
	}
	resp, err := f.do(ctx, http.MethodGet, u, "watch "+path, nil, 0, nil, http.StatusOK)
	if err != nil {
		return nil, err
	}
	return func(yield func(protocol.FSEvent, error) bool) {
		defer resp.Body.Close()
		d := json.NewDecoder(resp.Body)
		for {
			var ev protocol.FSEvent
			if err := d.Decode(&ev); err != nil {
				if err != io.EOF && ctx.Err() == nil {
					yield(protocol.FSEvent{}, fmt.Errorf("box %q: watch %s: %w", f.b.name, path, err))
				}
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}, nil
}
