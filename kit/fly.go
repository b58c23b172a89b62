package kit

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/glovebox-dev/glovebox/internal/wsconn"
)

// More than one machine. Sessions (and so resume) and the files of
// GET /files/{id} live on the machine that made them. On Fly, which starts
// two machines per app by default and balances requests between them, the
// kit names every session and file it makes "<machine>_<id>", with the
// machine's FLY_MACHINE_ID, and answers a request for another machine's id
// (a WebSocket that resumes its session, a /files download, a session's
// own routes under /sessions/{id}/, a preview link's host) with Fly's
// fly-replay response header: Fly's proxy then replays the request on the
// machine that owns the id (fly.io/docs/networking/dynamic-request-routing).
// Elsewhere (no FLY_MACHINE_ID) ids are as before.

// FlyReplayHeader and FlyReplaySrcHeader are Fly's: the response header
// that asks the proxy to replay a request, and the request header a
// replayed request carries.
const (
	FlyReplayHeader    = "Fly-Replay"
	FlyReplaySrcHeader = "Fly-Replay-Src"
)

// flyMachineRE is a Fly machine id as ids carry it.
var flyMachineRE = regexp.MustCompile(`^[a-z0-9]{1,32}$`)

// flyMachine returns this machine's id from FLY_MACHINE_ID, "" when the
// kit is not on Fly (or the value is not one).
func flyMachine(getenv func(string) string) string {
	if m := getenv("FLY_MACHINE_ID"); flyMachineRE.MatchString(m) {
		return m
	}
	return ""
}

// machineID returns id as this machine names it: "<machine>_<id>" on Fly.
func (c *config) machineID(id string) string {
	if c.machine == "" {
		return id
	}
	return c.machine + "_" + id
}

// ownerOf returns the machine an id names, "" for an id without one.
func ownerOf(id string) string {
	owner, _, ok := strings.Cut(id, "_")
	if !ok || !flyMachineRE.MatchString(owner) {
		return ""
	}
	return owner
}

// replayElsewhere answers a request for another machine's session or file
// with fly-replay and reports whether it did; machine is this one's. A request Fly has already
// replayed is never sent on again: the owner is gone, and the request is
// served here (unknown session, 404).
func replayElsewhere(w http.ResponseWriter, r *http.Request, machine string) bool {
	if machine == "" || r.Header.Get(FlyReplaySrcHeader) != "" {
		return false
	}
	var id string
	switch {
	case strings.HasPrefix(r.URL.Path, "/files/"):
		id = strings.TrimPrefix(r.URL.Path, "/files/")
	case strings.HasPrefix(r.URL.Path, "/sessions/"):
		// A session's own routes (session_routes.go): its previews,
		// terminals, files.
		id, _, _, _ = splitSessionPath(r.URL.Path)
	case wsconn.IsUpgrade(r):
		id = r.URL.Query().Get("resume")
	}
	owner := ownerOf(id)
	if owner == "" || owner == machine {
		return false
	}
	w.Header().Set(FlyReplayHeader, "instance="+owner)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusConflict)
	return true
}
