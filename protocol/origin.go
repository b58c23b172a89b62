package protocol

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// HTTPSpec tunes the box's HTTP routes for browsers.
type HTTPSpec struct {
	// CORSOrigins are the web origins ("https://app.example.com") whose
	// pages may call the box's HTTP routes (/files, /uploads,
	// /environment, ...) from a browser, with a key-less token in their
	// Authorization header: the kit answers their preflight requests and
	// marks its answers readable by them. "*" allows every origin, which
	// is safe for routes that take no cookies (every route but
	// /inspect, which never answers cross-origin). Empty: none, as v1.
	// WebSockets are not subject to CORS and need no entry.
	CORSOrigins []string `json:"cors_origins,omitempty"`
}

// CheckOrigin reports whether o is a web origin as a browser sends it in
// an Origin header: scheme "http" or "https", a host and an optional
// port, lower case, nothing else. "*" is not an origin.
func CheckOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Opaque != "" {
		return fmt.Errorf("%q is not an origin: it must be https://host or http://host, with an optional :port", o)
	}
	if u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(o, "#") {
		return fmt.Errorf("%q is not an origin: an origin is scheme://host[:port], with no user, path, query or fragment (%s://%s)", o, u.Scheme, u.Host)
	}
	if strings.ToLower(o) != o {
		return fmt.Errorf("%q is not an origin as a browser sends it: write it in lower case (%q)", o, strings.ToLower(o))
	}
	if p := u.Port(); p != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
			return fmt.Errorf("%q is not an origin: its port must be a number from 1 to 65535", o)
		}
	}
	host := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("%q is not an origin: %q is not an IPv6 address", o, host)
		}
		return nil
	}
	if host == "" || strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
		return fmt.Errorf("%q is not an origin: host %q has characters a host name cannot have (write an internationalised name in its xn-- form)", o, host)
	}
	return nil
}
