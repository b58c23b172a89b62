package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Placeholder is the value agents see in place of the secret name: stable
// for a seed, recognisably fake, and safe in any header.
func Placeholder(seed, name string) string {
	sum := sha256.Sum256([]byte("glovebox placeholder\x00" + seed + "\x00" + name))
	return "glovebox-placeholder-" + name + "-" + hex.EncodeToString(sum[:8])
}

// authority is the box's CA: made at New, its key only in memory.
type authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	pem     []byte
	mu      sync.Mutex
	leaves  map[string]*tls.Certificate
	serials int64
}

func newAuthority(now time.Time) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	var id [8]byte
	rand.Read(id[:])
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "Glovebox box CA " + hex.EncodeToString(id[:]), Organization: []string{"Glovebox egress proxy"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(5 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{
		cert: cert, key: key, leaves: map[string]*tls.Certificate{}, serials: 1,
		pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// leaf returns a certificate for host signed by the CA, made once.
func (a *authority) leaf(host string, now time.Time) (*tls.Certificate, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.leaves[host]; ok && now.Before(c.Leaf.NotAfter.Add(-time.Hour)) {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	a.serials++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(a.serials),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		tmpl.IPAddresses = []net.IP{ip.AsSlice()}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	a.leaves[host] = c
	return c, nil
}

// CACert returns the box CA's certificate, PEM-encoded.
func (p *Proxy) CACert() []byte { return slices.Clone(p.ca.pem) }

// systemBundles are where CA bundles live on common systems and in Nix
// images.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/ssl/certs/ca-bundle.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
}

// SystemBundle names the system's CA bundle: the file named by
// SSL_CERT_FILE or NIX_SSL_CERT_FILE in getenv, else the first of the
// usual places that is a file and not empty; "" when there is none.
func SystemBundle(getenv func(string) string) string {
	paths := []string{}
	for _, k := range []string{"SSL_CERT_FILE", "NIX_SSL_CERT_FILE"} {
		if v := getenv(k); v != "" {
			paths = append(paths, v)
		}
	}
	for _, p := range append(paths, systemBundles...) {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
			return p
		}
	}
	return ""
}

// WriteBundle writes the file agents' tools trust to path: the CA bundle
// named system ("" for none) followed by the box CA. The system's
// bundle, some 200 KiB, is copied by the kernel rather than read into
// the kit's memory.
func (p *Proxy) WriteBundle(path, system string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	tail, err := copyBundle(f, system)
	if err != nil {
		f.Close()
		return fmt.Errorf("copy the system's CA bundle %s: %w", system, err)
	}
	tail = append(tail, "# Glovebox box CA: the egress proxy brokers secrets with it\n"...)
	tail = append(tail, p.ca.pem...)
	if _, err := f.Write(tail); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// copyBundle copies the file named system, if any, to w, and returns the
// line break to write after it when its last line has none.
func copyBundle(w io.Writer, system string) ([]byte, error) {
	if system == "" {
		return nil, nil
	}
	src, err := os.Open(system)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	n, err := io.Copy(w, src)
	if err != nil || n == 0 {
		return nil, err
	}
	last := make([]byte, 1)
	if _, err := src.ReadAt(last, n-1); err != nil {
		return nil, err
	}
	if last[0] != '\n' {
		return []byte{'\n'}, nil
	}
	return nil, nil
}

// Env returns the variables an agent needs to use the proxy listening at
// addr (host:port) and trust the bundle at bundlePath, and the
// placeholders in place of the brokered secrets.
func (p *Proxy) Env(addr, bundlePath string) []string {
	httpURL := "http://" + addr
	env := []string{
		"HTTP_PROXY=" + httpURL, "http_proxy=" + httpURL,
		"HTTPS_PROXY=" + httpURL, "https_proxy=" + httpURL,
		"ALL_PROXY=socks5h://" + addr, "all_proxy=socks5h://" + addr,
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
		// Node 24 (and 22.21+) honours the variables above only when told to.
		"NODE_USE_ENV_PROXY=1",
	}
	if bundlePath != "" {
		for _, k := range []string{"SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO"} {
			env = append(env, k+"="+bundlePath)
		}
	}
	for _, s := range p.secrets {
		env = append(env, s.Name+"="+s.placeholder)
	}
	return env
}

// Placeholders maps each brokered secret's name to its placeholder.
func (p *Proxy) Placeholders() map[string]string {
	m := make(map[string]string, len(p.secrets))
	for _, s := range p.secrets {
		m[s.Name] = s.placeholder
	}
	return m
}

// brokers reports whether some secret is sent to host on port.
func (p *Proxy) brokers(host string, port int) bool {
	for _, s := range p.secrets {
		if s.Port == port && slices.Contains(s.Hosts, host) {
			return true
		}
	}
	return false
}

// stripString removes every placeholder from v and names the secrets
// whose placeholders it held.
func (p *Proxy) stripString(v string) (string, []string) {
	var names []string
	for _, s := range p.secrets {
		if strings.Contains(v, s.placeholder) {
			v = strings.ReplaceAll(v, s.placeholder, "")
			names = append(names, s.Name)
		}
	}
	return v, names
}

// stripURL removes every placeholder from u's path and query and returns
// the names stripped.
func (p *Proxy) stripURL(u *url.URL) []string {
	var all []string
	for _, f := range []*string{&u.Path, &u.RawPath, &u.RawQuery} {
		if v, names := p.stripString(*f); len(names) > 0 {
			*f = v
			all = appendNew(all, names...)
		}
	}
	return all
}

// strip removes every placeholder from hd, dropping a value it leaves
// empty, and returns the names stripped.
func (p *Proxy) strip(hd http.Header) (stripped []string) {
	for k, vs := range hd {
		changed := false
		for i, v := range vs {
			nv, names := p.stripString(v)
			if len(names) == 0 {
				continue
			}
			stripped = appendNew(stripped, names...)
			vs[i] = nv
			if t := strings.TrimSpace(nv); t == "" || strings.EqualFold(t, "bearer") {
				vs[i], changed = "", true
			}
		}
		if changed {
			vs = slices.DeleteFunc(vs, func(v string) bool { return v == "" })
			if len(vs) == 0 {
				delete(hd, k)
			} else {
				hd[k] = vs
			}
		}
	}
	return stripped
}

// broker puts real values into the request to host:port and strips
// every other placeholder. It returns the names brokered and stripped.
func (p *Proxy) broker(hd http.Header, host string, port int) (brokered, stripped []string) {
	for _, s := range p.secrets {
		if s.Port != port || !slices.Contains(s.Hosts, host) {
			continue
		}
		if s.Header != "" {
			k := http.CanonicalHeaderKey(s.Header)
			vs := hd[k]
			for i, v := range vs {
				if strings.Contains(v, s.placeholder) {
					vs[i] = strings.ReplaceAll(v, s.placeholder, s.Value)
					brokered = appendNew(brokered, s.Name)
				}
			}
		}
		vs := hd["Authorization"]
		for i, v := range vs {
			if tok, ok := cutBearer(v); ok && tok == s.placeholder {
				vs[i] = "Bearer " + s.Value
				brokered = appendNew(brokered, s.Name)
			}
			if s.Form != protocol.InjectFormBasic {
				continue
			}
			if user, pass, ok := cutBasic(v); ok && (user == s.placeholder || pass == s.placeholder) {
				vs[i] = "Basic " + base64.StdEncoding.EncodeToString([]byte(s.User+":"+s.Value))
				brokered = appendNew(brokered, s.Name)
			}
		}
	}
	return brokered, p.strip(hd)
}

// cutBasic decodes an Authorization: Basic value. The placeholder may be
// either half: git sends the URL's user name alone when it has no
// password.
func cutBasic(v string) (user, pass string, ok bool) {
	if len(v) < 6 || !strings.EqualFold(v[:6], "basic ") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[6:]))
	if err != nil {
		return "", "", false
	}
	user, pass, _ = strings.Cut(string(raw), ":")
	return user, pass, true
}

func cutBearer(v string) (string, bool) {
	if len(v) < 7 || !strings.EqualFold(v[:7], "bearer ") {
		return "", false
	}
	return strings.TrimSpace(v[7:]), true
}

func appendNew(list []string, names ...string) []string {
	for _, n := range names {
		if !slices.Contains(list, n) {
			list = append(list, n)
		}
	}
	return list
}

// hideValues replaces any real secret value in a response's headers with
// its placeholder, and any encoded form of it (needles) with asterisks,
// so that an upstream echoing a header cannot hand the value to the agent
// that way.
func (p *Proxy) hideValues(hd http.Header) {
	for _, vs := range hd {
		for i, v := range vs {
			for _, s := range p.secrets {
				if s.Value == "" {
					continue
				}
				v = strings.ReplaceAll(v, s.Value, s.placeholder)
				for _, n := range needles(s.Value)[1:] {
					v = strings.ReplaceAll(v, string(n), strings.Repeat("*", len(n)))
				}
			}
			vs[i] = v
		}
	}
}
