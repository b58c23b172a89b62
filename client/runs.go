package client

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/glovebox-dev/glovebox/protocol"
)

// RunOptions choose which run records Run and RunChain fetch, and the key
// they are checked with.
type RunOptions struct {
	// Session is the session whose records to read; empty means this
	// Box's current session (for Run: any session this credential may
	// read, when the Box has none yet).
	Session string
	// PublicKey is the box's run record key, runs.public_key of its
	// manifest (glovebox.json). Empty means the one the box's
	// /environment reports: give the manifest's to check the box's
	// records without trusting the box itself.
	PublicKey string
}

// SessionID returns the id of this Box's session, from the box's last
// hello; empty before the first connection.
func (b *Box) SessionID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.session
}

// maxRunsBody bounds a /runs answer: a session's chain of records.
const maxRunsBody = 64 << 20

// Run fetches the signed record of a prompt (GET /runs/{prompt}; the key,
// a runs or admin token, or the credential that opened its session) and
// verifies it. A record that fails verification is returned with the
// error (a *protocol.RunVerifyError naming what was changed).
func (b *Box) Run(ctx context.Context, prompt string, o RunOptions) (*protocol.RunRecord, *protocol.SignedRun, error) {
	pub, err := b.runKey(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	u := b.route("runs/" + prompt)
	if s := cmp.Or(o.Session, b.SessionID()); s != "" {
		u.RawQuery = url.Values{"session": {s}}.Encode()
	}
	body, err := b.getBody(ctx, u, u.Path, true, maxRunsBody)
	if err != nil {
		return nil, nil, err
	}
	s, err := protocol.DecodeSignedRun(body)
	if err != nil {
		return nil, nil, fmt.Errorf("box %q: %w", b.name, err)
	}
	if err := s.Verify(pub); err != nil {
		return nil, s, err
	}
	r, err := s.Run()
	return r, s, err
}

// RunChain fetches a session's chain of run records (GET
// /runs?session=ID) and verifies it: every record and every link between
// them (protocol.VerifyRunChain). A chain that fails is returned with the
// error.
func (b *Box) RunChain(ctx context.Context, o RunOptions) ([]protocol.SignedRun, error) {
	pub, err := b.runKey(ctx, o)
	if err != nil {
		return nil, err
	}
	session := cmp.Or(o.Session, b.SessionID())
	if session == "" {
		return nil, fmt.Errorf("box %q: run chain: no session given, and this Box has none yet", b.name)
	}
	u := b.route("runs")
	u.RawQuery = url.Values{"session": {session}}.Encode()
	body, err := b.getBody(ctx, u, u.Path, true, maxRunsBody)
	if err != nil {
		return nil, err
	}
	var c protocol.RunChain
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, fmt.Errorf("box %q: the run chain is not the JSON expected: %w", b.name, err)
	}
	return c.Records, protocol.VerifyRunChain(pub, c.Records)
}

// runKey is the key records are checked with.
func (b *Box) runKey(ctx context.Context, o RunOptions) ([]byte, error) {
	key := o.PublicKey
	if key == "" {
		env, err := b.Environment(ctx)
		if err != nil {
			return nil, err
		}
		if env.Runs == nil || env.Runs.PublicKey == "" {
			return nil, fmt.Errorf("box %q keeps no run records (its /environment has no runs.public_key)", b.name)
		}
		key = env.Runs.PublicKey
	}
	return protocol.ParseRunPublicKey(key)
}
