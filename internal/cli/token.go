package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

var tokenCommand = command{
	name:    "token",
	summary: "mint a short-lived, scoped token from a box key, for a browser or another service",
	run:     runToken,
}

// maxTokenTTL bounds --ttl: a token cannot be revoked short of changing
// the box key.
const maxTokenTTL = 30 * 24 * time.Hour

const tokenHelp = `
Mints the token locally from the key: nothing is sent to the box. The box
accepts it wherever it accepts the key, for the scopes it carries, until it
expires: connect (the WebSocket: Authorization: Bearer TOKEN, or the
subprotocols glovebox.v1 and bearer.TOKEN), files (GET /files/ID, also as
/files/ID?token=TOKEN; only the --file ids when given), environment
(GET /environment), admin (the egress policy, GET /sessions, GET /logs,
listing and deleting /files), metrics (GET /metrics), logs (GET /logs),
audit (GET /egress/log: the egress audit trail, gbx egress log), runs
(GET /runs: every signed run record, gbx runs). The box's clock decides
expiry.

The key: --key or $GLOVEBOX_KEY, or --box NAME's key from the endpoints file.`

func runToken(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var ttl time.Duration
	var scopes, files []string
	fs := newFlags(stdio, "token", "token [--key KEY | --box NAME] [--ttl 15m] [--scope connect,files,environment,admin,metrics,logs,audit,runs] [--file ID ...] [--subject NAME]"+"\n"+tokenHelp+"\n"+endpointsHelp)
	bf.register(fs)
	fs.DurationVar(&ttl, "ttl", 15*time.Minute, "how long the token works")
	fs.StringSliceVar(&scopes, "scope", []string{protocol.ScopeConnect}, "what the token allows: "+strings.Join(protocol.Scopes, ", "))
	fs.StringArrayVar(&files, "file", nil, "a /files id the token may read (repeat; implies --scope files when --scope is not given)")
	var subject string
	fs.StringVar(&subject, "subject", "", "whom the token is for: a session it opens can be resumed by any token of the same subject (without one, only by the same token)")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: token takes no arguments", ErrUsage)
	}
	if ttl <= 0 || ttl > maxTokenTTL {
		return fmt.Errorf("%w: --ttl %s: want more than 0 and at most %s", ErrUsage, ttl, maxTokenTTL)
	}
	if len(files) > 0 && !fs.Changed("scope") {
		scopes = []string{protocol.ScopeFiles}
	}
	key := bf.key
	if key == "" {
		key = stdio.Getenv("GLOVEBOX_KEY")
	}
	if bf.url == "" && bf.box == "" && key == "" {
		return fmt.Errorf("%w: which key? pass --key, --box NAME (from %s), or set GLOVEBOX_KEY", ErrUsage, bf.endpointsPath(stdio))
	}
	if bf.url != "" || bf.box != "" {
		ep, err := bf.endpoint(stdio)
		if err != nil {
			return err
		}
		key = ep.Key
	}
	exp := time.Now().Add(ttl)
	tok, err := protocol.MintToken(key, protocol.TokenClaims{Scopes: scopes, Expires: exp, Files: files, Subject: subject})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, strings.TrimPrefix(err.Error(), "mint token: "))
	}
	fmt.Fprintln(stdio.Stdout, tok)
	fmt.Fprintf(stdio.Stderr, "token for key %s: %s, expires %s\n", protocol.Fingerprint(key), strings.Join(scopes, ","), exp.UTC().Truncate(time.Second).Format(time.RFC3339))
	return nil
}
