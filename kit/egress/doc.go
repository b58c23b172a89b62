// Package egress is the box's egress proxy: every connection a session's
// agents make leaves through it, and it decides each by the box's network
// policy, tells the agent why it blocked one, logs every decision, and
// puts brokered secrets into requests so that their real values never
// enter a session.
//
// One listener serves three protocols, told apart by the first byte a
// client sends: HTTP forward proxying (absolute-URI requests), CONNECT
// tunnels, and SOCKS5 (CONNECT, with names: ALL_PROXY=socks5h://... covers
// git, ssh and databases). The proxy does not care what kind of listener
// it serves: a loopback TCP port (advisory mode, agents are told to use it
// through HTTP_PROXY and friends) or a unix socket a session's network
// namespace is bridged to (enforced mode, its only route out).
//
// Decisions are by host name and port, then by every address the proxy
// resolved the name to: wildcards (*.example.com), host:port, CIDRs, a
// default, and deny always wins. A host in any spelling the system's
// resolver takes as an address (2852039166, 0xa9fea9fe, 169.254.43518) is
// that address. The addresses the kit's one table (package netguard)
// closes, loopback, this host's own addresses and the kit's ports,
// link-local, cloud metadata in every spelling, private and
// special-purpose ranges, are denied unless an allow rule names the
// address or its range ("10.0.5.0/24:5432" opens a database on the box's
// private network; "0.0.0.0/0" opens none of them). The proxy dials only
// the addresses it checked, so a name that resolves to a closed address
// (DNS rebinding) is denied.
//
// A block reads as one: a plain-HTTP request gets 451 with a body naming
// the host, the rule and how to allow it in glovebox.toml; a CONNECT gets
// the same as the proxy's answer (and its status line says it, which is
// what most tools print); SOCKS gets "connection not allowed by ruleset"
// at once.
//
// The egress log. Each decision becomes one Event for the session's sink:
// a plain-HTTP request or a request inside a brokered tunnel when its
// answer has been passed on, a tunnel (CONNECT, SOCKS) when it closes,
// a block at once. Events carry bytes each way; Stats adds them up. With
// Options.Audit each is also a line of the box's audit trail (a Journal:
// numbered, with the addresses resolved and the glovebox.toml line of its
// rule, in a bounded ring and a rotated file; audit.go).
//
// A human in the loop. With the policy's Ask on, a connection no rule
// covers (the default would decide it) waits while the session's Ask asks
// its client: once, for the session, for the box, or deny; no answer in
// time denies. An approved connection is decided again with the approval
// as an allow rule, so an approval never opens a closed address (ask.go).
//
// Request rules. A host that a request rule (NetworkSpec.AllowRequests:
// host, methods, path prefixes) names is reached only by the requests
// such rules allow: plain HTTP is read as it is forwarded, and a tunnel
// (CONNECT, SOCKS) is terminated with the box CA as for brokering, each
// request decided before it is sent. Paths match on the request's path
// decoded once (protocol.CleanRequestPath); a path servers could read
// another way (dot or empty segments, ;, \, control characters, double
// encoding) is refused whatever the rules say.
//
// Session rules. A Session may carry its own rule set (SessionRules,
// replaceable at any time): a connection goes ahead when the box's policy
// and the session's rules both allow it, or when the box's policy denies
// it only by its default, the session's rules allow it by an allow rule
// and the box's session_may_allow covers it. Decisions by a session's
// rules name them ("session: ...") and say who can change them.
//
// Brokering. A secret with hosts and a header reaches agents only as a
// placeholder ("glovebox-placeholder-NAME-<hash>", stable per box). A
// CONNECT to one of its hosts on its port (443 unless the secret names
// another) is terminated with a per-box CA, made at New and kept in
// memory; the proxy puts the real value in place of the placeholder in
// the named header and in an Authorization bearer (and, for a secret of
// form "basic", in an Authorization: Basic whose user or password is the
// placeholder, as git hosts take a token), asks the host for an
// identity (uncompressed) answer, and forwards over TLS, verifying the
// real server's certificate. Everything the host sends back is scrubbed
// of the real value: headers get the placeholder in its place, bodies
// asterisks, in its raw, URL-escaped and base64 forms (the Basic form
// too), across chunk and TLS-record boundaries; a gzip or deflate body
// the host sends anyway is decoded first, any other encoding refused. A
// connection to another port of the host is a plain tunnel. A
// placeholder in a request to any other host the proxy can read (plain
// HTTP) is stripped and reported in the event; inside another host's TLS
// tunnel the proxy cannot see it, but it is only a placeholder there:
// the real value never leaves except to its hosts. A SOCKS connection to
// a brokered host and port is terminated the same way. Brokering covers
// request headers, not request bodies, and HTTP/1.1 only (no upgrades to
// WebSocket on brokered hosts).
package egress
