package kit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/kit/route"
	snap "github.com/glovebox-dev/glovebox/kit/snapshot"
	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// Snapshots, restores and forks (kit/snapshot does the work):
//
//	POST   /sessions/{id}/snapshot   the session's directories into the store (201, SnapshotInfo)
//	POST   /sessions/{id}/fork       {"count":N}: N new sessions, each a copy (201, ForkResult)
//	GET    /snapshots                SnapshotList, newest first
//	GET    /snapshots/{id}           the snapshot's manifest
//	DELETE /snapshots/{id}           204
//	POST   /snapshots/{id}/restore   {"force":bool}: a new session from it (201, RestoreResult)
//
// The session routes take the session's own credential, a snapshots or an
// admin token, or the key; /snapshots takes a snapshots or admin token, or
// the key. A restored or forked session is a new session with its own
// sandbox, owned by whoever asked for it (a fork: the parent's owner),
// detached until its client attaches with ?resume=ID&last_seq=0 within
// the resume grace.

// DefaultMaxSnapshots caps a box's snapshot store.
const DefaultMaxSnapshots = 100

// maxForks caps one fork request.
const maxForks = 16

type snapshots struct {
	s     *Server
	store snap.Store
	lim   snap.Limits
	max   int
	src   snap.Source // the box's part of every snapshot's source

	mu     sync.Mutex                 // orders takes against the store's count
	caches map[string]*snap.HashCache // by session: its files' hashes (under mu)
}

// snapshots sets up the snapshot store the manifest asks for, and
// announces the capability.
func (b *boot) snapshots(s *Server) {
	spec := s.man.Snapshots
	if spec == nil {
		spec = &protocol.SnapshotsSpec{}
	}
	sn := &snapshots{s: s, lim: snap.DefaultLimits, max: DefaultMaxSnapshots}
	if spec.MaxSize != "" {
		if n, err := protocol.ParseSize(spec.MaxSize); err == nil {
			sn.lim.MaxSize = n
		}
	}
	if spec.MaxSnapshots > 0 {
		sn.max = spec.MaxSnapshots
	}
	switch spec.Store {
	case protocol.SnapshotStoreS3:
		a, _ := s.opts.Adapters[protocol.AdapterS3].(*storage.S3)
		if a == nil {
			b.add("manifest: snapshots.store is s3 and the kit has no s3 adapter: set AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and GLOVEBOX_S3_BUCKET")
			return
		}
		if bucket, _, _ := a.Defaults(); bucket == "" {
			b.add("manifest: snapshots.store is s3 and GLOVEBOX_S3_BUCKET is not set: set the bucket snapshots go to")
			return
		}
		sn.store = snap.NewS3(a, spec.Prefix)
	default:
		if !dirOK(s.stateDir) {
			return // reported by dirs
		}
		st, err := snap.OpenLocal(filepath.Join(s.stateDir, "snapshots"))
		if err != nil {
			b.add("snapshots: %v", err)
			return
		}
		sn.store = st
	}
	digest := s.opts.ManifestDigest
	if digest == "" {
		mb, _ := json.Marshal(s.man)
		sum := sha256.Sum256(mb)
		digest = hex.EncodeToString(sum[:])
	}
	sn.src = snap.Source{Box: s.man.Name, BoxVersion: s.man.Version, ClosureSHA256: closureHash(s), ManifestSHA256: digest}
	s.snaps = sn
	s.caps = append(slices.Clone(s.caps), protocol.CapSnapshots)
}

// features are the per-session routes.
func (sn *snapshots) features() []sessionFeature {
	if sn == nil {
		return nil
	}
	return []sessionFeature{
		{name: "snapshot", scope: protocol.ScopeSnapshots, serve: sn.serveTake},
		{name: "fork", scope: protocol.ScopeSnapshots, serve: sn.serveFork},
	}
}

func (sn *snapshots) routes() []route.Route {
	if sn == nil {
		return nil
	}
	return []route.Route{
		route.Path("/snapshots", sn.serveList),
		route.Prefix("/snapshots/", sn.serveOne),
	}
}

// snapshotStatus maps a snapshot error to its HTTP status.
func snapshotStatus(err error) int {
	switch {
	case errors.Is(err, snap.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, snap.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, snap.ErrImage), errors.Is(err, errQuota):
		return http.StatusConflict
	case errors.Is(err, snap.ErrCorrupt):
		return http.StatusUnprocessableEntity
	case errors.Is(err, errSessionEnded):
		return http.StatusGone
	case errors.Is(err, errBoxFull):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (sn *snapshots) fail(w http.ResponseWriter, what string, err error) {
	code := snapshotStatus(err)
	if code == http.StatusInternalServerError {
		sn.s.log.Warn(what, "err", err)
	}
	http.Error(w, what+": "+err.Error(), code)
}

// serveTake answers POST /sessions/{id}/snapshot.
func (sn *snapshots) serveTake(w http.ResponseWriter, r *http.Request, ss *session, rest string) {
	if rest != "" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		route.MethodNotAllowed(w, "POST")
		return
	}
	info, err := sn.take(r.Context(), ss)
	if err != nil {
		sn.fail(w, "snapshot session "+ss.id, err)
		return
	}
	writeJSON(w, http.StatusCreated, info)
}

// take snapshots ss, one take at a time, within the store's count.
func (sn *snapshots) take(ctx context.Context, ss *session) (protocol.SnapshotInfo, error) {
	fsys, roots, err := ss.filesFS()
	if err != nil {
		return protocol.SnapshotInfo{}, err
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	ids, err := sn.store.Manifests(ctx)
	if err != nil {
		return protocol.SnapshotInfo{}, err
	}
	if len(ids) >= sn.max {
		return protocol.SnapshotInfo{}, fmt.Errorf("the box holds %d snapshots, its most (snapshots.max_snapshots): delete some with DELETE /snapshots/{id}: %w", len(ids), errQuota)
	}
	src := sn.src
	src.Session, src.Owner, src.Agent = ss.id, ss.owner, ss.agentSession()
	start := time.Now()
	id, m, stats, err := snap.TakeCached(ctx, fsys, roots, sn.store, src, sn.lim, start, sn.cache(ss))
	if err != nil {
		return protocol.SnapshotInfo{}, err
	}
	info := describeSnapshot(id, m)
	info.NewBlobs, info.NewBytes = stats.NewBlobs, stats.NewBytes
	ss.logger().Info("session snapshotted", "snapshot", id, "entries", info.Entries, "bytes", m.Size,
		"new_blobs", stats.NewBlobs, "new_bytes", stats.NewBytes, "skipped", info.Skipped, "ms", time.Since(start).Milliseconds())
	return info, nil
}

// cache is the session's hash cache, made on its first snapshot; those
// of ended sessions go. sn.mu is held.
func (sn *snapshots) cache(ss *session) *snap.HashCache {
	if sn.caches == nil {
		sn.caches = map[string]*snap.HashCache{}
	}
	for id := range sn.caches {
		if o := sn.s.live.lookup(id); o == nil || o.ctx.Err() != nil {
			delete(sn.caches, id)
		}
	}
	c := sn.caches[ss.id]
	if c == nil {
		c = snap.NewHashCache()
		sn.caches[ss.id] = c
	}
	return c
}

var (
	errQuota   = errors.New("kit: snapshot quota")
	errBoxFull = errors.New("kit: the box is full or closing")
)

func describeSnapshot(id string, m *protocol.SnapshotManifest) protocol.SnapshotInfo {
	return protocol.SnapshotInfo{
		ID: id, Session: m.Session, Owner: m.Owner, Created: m.Created, ClosureSHA256: m.ClosureSHA256,
		Size: m.Size, Entries: len(m.Entries), Skipped: len(m.Skipped),
	}
}

// serveList answers GET /snapshots.
func (sn *snapshots) serveList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !sn.s.auth.Admit(w, r, protocol.ScopeSnapshots, protocol.ScopeAdmin) {
		return
	}
	list, err := sn.list(r.Context())
	if err != nil {
		sn.fail(w, "list snapshots", err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// list describes the stored snapshots, newest first.
func (sn *snapshots) list(ctx context.Context) (protocol.SnapshotList, error) {
	list := protocol.SnapshotList{Snapshots: []protocol.SnapshotInfo{}}
	ids, err := sn.store.Manifests(ctx)
	if err != nil {
		return list, err
	}
	for _, id := range ids {
		m, err := snap.Load(ctx, sn.store, id, sn.lim)
		if err != nil {
			sn.s.log.Warn("snapshot store: a snapshot does not load", "snapshot", id, "err", err)
			continue
		}
		list.Snapshots = append(list.Snapshots, describeSnapshot(id, m))
	}
	slices.SortFunc(list.Snapshots, func(a, b protocol.SnapshotInfo) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return list, nil
}

// serveOne answers /snapshots/{id}[/restore].
func (sn *snapshots) serveOne(w http.ResponseWriter, r *http.Request, rest string) {
	if !sn.s.auth.Admit(w, r, protocol.ScopeSnapshots, protocol.ScopeAdmin) {
		return
	}
	id, action, _ := strings.Cut(rest, "/")
	if !protocol.ValidSnapshotID(id) {
		http.Error(w, fmt.Sprintf("no snapshot %q: a snapshot id is 64 hex digits (GET /snapshots lists them)", id), http.StatusNotFound)
		return
	}
	switch {
	case action == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		m, err := snap.Load(r.Context(), sn.store, id, sn.lim)
		if err != nil {
			sn.fail(w, "snapshot "+id, err)
			return
		}
		writeJSON(w, http.StatusOK, m)
	case action == "" && r.Method == http.MethodDelete:
		sn.mu.Lock()
		err := sn.store.DeleteManifest(r.Context(), id)
		removed := 0
		if l, ok := sn.store.(*snap.Local); ok && err == nil {
			// No snapshot is being taken (sn.mu): its blobs that no other
			// snapshot holds go now.
			var gerr error
			if removed, gerr = l.GC(r.Context(), 0); gerr != nil {
				sn.s.log.Warn("snapshot store: collecting blobs", "err", gerr)
			}
		}
		sn.mu.Unlock()
		if err != nil {
			sn.fail(w, "delete snapshot "+id, err)
			return
		}
		sn.s.log.Info("snapshot deleted", "snapshot", id, "blobs_removed", removed)
		w.WriteHeader(http.StatusNoContent)
	case action == "":
		route.MethodNotAllowed(w, "GET, HEAD, DELETE")
	case action == "restore" && r.Method == http.MethodPost:
		sn.serveRestore(w, r, id)
	case action == "restore":
		route.MethodNotAllowed(w, "POST")
	default:
		http.NotFound(w, r)
	}
}

// readJSONBody decodes a small optional JSON body (readBody, exec.go)
// into v.
func readJSONBody(r *http.Request, v any) error {
	b, err := readBody(r, 64<<10)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return err
	}
	return json.Unmarshal(b, v)
}

// serveRestore answers POST /snapshots/{id}/restore: the whole snapshot
// is checked (its manifest, its image, every blob) before the new
// session's directories get anything.
func (sn *snapshots) serveRestore(w http.ResponseWriter, r *http.Request, id string) {
	var req protocol.RestoreRequest
	if err := readJSONBody(r, &req); err != nil {
		http.Error(w, "restore: bad body: "+err.Error()+` (want {"force":false})`, http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	m, err := snap.Load(ctx, sn.store, id, sn.lim)
	if err != nil {
		sn.fail(w, "restore snapshot "+id, err)
		return
	}
	warn, err := snap.CheckImage(m, sn.src.ClosureSHA256, req.Force)
	if err != nil {
		sn.fail(w, "restore snapshot "+id, err)
		return
	}
	// Verify before a session exists: a corrupt snapshot costs no sandbox.
	if err := snap.Verify(ctx, sn.store, m); err != nil {
		sn.fail(w, "restore snapshot "+id, err)
		return
	}
	who, mayRead := sn.s.requester(r)
	var warnings []string
	if warn != "" {
		warnings = append(warnings, warn)
	}
	ss, err := sn.s.detachedSession(who, mayRead, func(ss *session) error {
		ss.setResumeAgent(m.Agent) // its agent loads the conversation (persist.go)
		fsys, roots, err := ss.filesFS()
		if err != nil {
			return err
		}
		ws, err := snap.Restore(ctx, sn.store, m, fsys, roots)
		warnings = append(warnings, ws...)
		return err
	})
	if err != nil {
		sn.fail(w, "restore snapshot "+id, err)
		return
	}
	ss.logger().Info("session restored", "snapshot", id, "entries", len(m.Entries), "forced", warn != "")
	writeJSON(w, http.StatusCreated, protocol.RestoreResult{Session: ss.id, Snapshot: id, Warnings: warnings})
}

// requester is the identity a request's bearer opens sessions as, and the
// parked files its sessions may read (as grantFiles).
func (s *Server) requester(r *http.Request) (string, func(string) bool) {
	tok, _ := route.Bearer(r)
	if s.auth.isKey(tok) {
		return identityKey, anyFile
	}
	c, _ := s.auth.tokenClaims(tok)
	tok = strings.Clone(tok)
	return identity(tok, c, false), func(id string) bool { return s.auth.authorized(tok, true, protocol.ScopeFiles, id) }
}

// serveFork answers POST /sessions/{id}/fork.
func (sn *snapshots) serveFork(w http.ResponseWriter, r *http.Request, parent *session, rest string) {
	if rest != "" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		route.MethodNotAllowed(w, "POST")
		return
	}
	var req protocol.ForkRequest
	if err := readJSONBody(r, &req); err != nil {
		http.Error(w, "fork: bad body: "+err.Error()+` (want {"count":N})`, http.StatusBadRequest)
		return
	}
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Count < 0 || req.Count > maxForks {
		http.Error(w, fmt.Sprintf("fork: count %d: ask for 1 to %d sessions", req.Count, maxForks), http.StatusBadRequest)
		return
	}
	res, err := sn.fork(r.Context(), parent, req.Count)
	if err != nil {
		sn.fail(w, "fork session "+parent.id, err)
		return
	}
	writeJSON(w, http.StatusCreated, res)
}

// fork makes n sessions, each a copy of parent's directories. When one
// fails, those made are ended.
func (sn *snapshots) fork(ctx context.Context, parent *session, n int) (protocol.ForkResult, error) {
	from, roots, err := parent.filesFS()
	if err != nil {
		return protocol.ForkResult{}, err
	}
	start := time.Now()
	res := protocol.ForkResult{Sessions: []string{}, Method: "reflink"}
	var made []*session
	agentID := parent.agentSession()
	for range n {
		ss, err := sn.s.detachedSession(parent.owner, parent.mayReadFile, func(ss *session) error {
			ss.setResumeAgent(agentID) // each fork's agent loads its copy of the conversation
			to, troots, err := ss.filesFS()
			if err != nil {
				return err
			}
			for i := range roots {
				roots[i] = roots[i] && troots[i]
			}
			method, err := snap.Copy(ctx, from, to, roots, sn.lim)
			if method == "copy" {
				res.Method = "copy"
			}
			return err
		})
		if err != nil {
			for _, m := range made {
				m.end(errClosed)
			}
			return protocol.ForkResult{}, err
		}
		made = append(made, ss)
		res.Sessions = append(res.Sessions, ss.id)
	}
	parent.logger().Info("session forked", "sessions", res.Sessions, "method", res.Method, "ms", time.Since(start).Milliseconds())
	return res, nil
}

// detachedSession makes a session no connection holds yet, fills its
// directories with fill, and leaves it detached for the resume grace: its
// client attaches with ?resume=ID&last_seq=0.
func (s *Server) detachedSession(owner string, mayRead func(string) bool, fill func(*session) error) (*session, error) {
	ss := s.newSession()
	ss.owner, ss.mayReadFile = owner, mayRead
	s.mu.Lock()
	if s.closed || len(s.sessions) >= s.maxSessions {
		s.mu.Unlock()
		ss.end(errClosed)
		return nil, fmt.Errorf("the box holds %d sessions, its most, or is closing: try again later: %w", s.maxSessions, errBoxFull)
	}
	s.sessions[ss.id] = ss
	s.mu.Unlock()
	if err := fill(ss); err != nil {
		ss.end(errClosed)
		return nil, err
	}
	ss.opened.Store(true)
	s.obs.SessionsTotal.Add(1)
	s.limitLifetime(ss) // pause.go: sessions.lifetime counts from now
	ss.stream.detach()
	return ss, nil
}
