// Package netguard decides which addresses anything in the kit may dial:
// the egress proxy's three paths (forward, CONNECT, SOCKS), url inputs
// and storage endpoints all ask the same Guard, which holds one table.
//
// An address is closed unless its caller opens it on purpose: loopback;
// every address of the host's own interfaces; the kit's own listening
// ports on those; link-local; cloud metadata services in every spelling
// (IPv4-mapped, IPv4-compatible, NAT64, 6to4); private ranges (RFC 1918,
// 100.64.0.0/10, fc00::/7); multicast, broadcast, unspecified; and the
// other special-purpose blocks of the IANA registries that are not
// reachable on the internet (documentation, benchmarking, reserved).
// The table is Rows.
//
// A caller opens a closed address by naming it or its range: the egress
// proxy with a [network] allow rule ("10.0.5.0/24:5432"), the url adapter
// with its operator switches (which open the loopback and private
// classes), a test with Options.Open. A rule wider than a row does not
// open it: "0.0.0.0/0" opens nothing, "169.254.0.0/16" opens link-local
// but not the metadata address inside it, which must be named itself.
//
// The check is on the resolved address at dial time: callers resolve a
// name once, check every address, and dial only those (the proxy), or
// check in the dialer's Control hook, on the socket's own address (the
// adapters), so that DNS rebinding cannot slip past it.
//
// The host's own addresses and the kit's listening ports are read from
// the system and re-read when a check finds them older than a second
// (Options.MaxAge). Addresses change rarely and never at an agent's
// hand; a re-read is three netlink dumps (addresses, listening IPv4 and
// IPv6 sockets) and a scan of the kit's descriptors, about 0.1-0.3 ms,
// where a netlink subscription would hold a socket and a goroutine for
// the box's life to shave a one-second window no agent can open.
package netguard
