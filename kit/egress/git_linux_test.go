package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"net/http/cgi"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// gitServer is a real git smart-HTTP server (git http-backend behind a
// CGI handler) over TLS, on a test host in a network namespace: it
// takes Basic x-access-token:<token> and nothing else, and serves the
// bare repositories acme/repo.git and acme/other.git.
type gitServer struct {
	root  string
	roots *x509.CertPool
	mu    sync.Mutex
	auths []string // the Basic credentials it received, decoded
	paths []string
}

const gitToken = "ghs_real-token-0123456789abcdef"

func startGitServer(t *testing.T, tn *testNet, name string) *gitServer {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("the git test needs git's http-backend (apt install git): %v", err)
	}
	gs := &gitServer{root: t.TempDir()}
	seed := t.TempDir()
	git(t, seed, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(seed, "README"), []byte("hello\n"), 0o644)
	git(t, seed, "add", "README")
	git(t, seed, "commit", "-q", "-m", "first")
	for _, repo := range []string{"acme/repo.git", "acme/other.git"} {
		dir := filepath.Join(gs.root, repo)
		git(t, "", "init", "-q", "--bare", "-b", "main", dir)
		git(t, dir, "config", "http.receivepack", "true")
		git(t, seed, "push", "-q", dir, "main")
	}
	cgiH := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + gs.root, "GIT_HTTP_EXPORT_ALL=1"}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gs.mu.Lock()
		gs.paths = append(gs.paths, r.URL.Path)
		user, pass, ok := r.BasicAuth()
		if ok {
			gs.auths = append(gs.auths, user+":"+pass)
		}
		gs.mu.Unlock()
		if !ok || user != protocol.InjectBasicUser || pass != gitToken {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		r.Header.Del("Authorization")
		cgiH.ServeHTTP(w, r)
	})
	ca, caKey := testCA(t)
	gs.roots = x509.NewCertPool()
	gs.roots.AddCert(ca)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ln := tn.listen(t, net.JoinHostPort(tn.Peer.String(), "443"))
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}}
	done := make(chan struct{})
	go func() { defer close(done); srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close(); <-done })
	return gs
}

func (gs *gitServer) seen() (auths, paths []string) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return append([]string{}, gs.auths...), append([]string{}, gs.paths...)
}

// git runs git in dir (the test's side: seeding and checking repositories).
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(),
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// agentGitOf runs git as the box's agent would, with the box's
// environment and home as its home, for 60 s at most.
func agentGitOf(b *box, home string) func(dir string, args ...string) (string, error) {
	return func(dir string, args ...string) (string, error) {
		// The agent writes the remote with its placeholder, as it would
		// with a real token.
		cmd := exec.Command("sh", append([]string{"-c", `exec git "$@"`, "git"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(b.env(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
			"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com")
		timer := time.AfterFunc(60*time.Second, func() {
			if cmd.Process != nil {
				cmd.Process.Kill()
			}
		})
		defer timer.Stop()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// checkGitServerSaw checks that the git server received the real token
// and no other credentials, and requests for acme/repo.git only; it
// returns how many requests it saw.
func checkGitServerSaw(t *testing.T, gs *gitServer) int {
	t.Helper()
	auths, paths := gs.seen()
	sawToken := false
	for _, a := range auths {
		if a == protocol.InjectBasicUser+":"+gitToken {
			sawToken = true
		} else {
			t.Errorf("the server received the credentials %q, want only the real token", a)
		}
	}
	if !sawToken {
		t.Error("the token never reached the server")
	}
	for _, p := range paths {
		if !strings.HasPrefix(p, "/acme/repo.git/") {
			t.Errorf("the server saw a request for %s", p)
		}
	}
	return len(paths)
}

// pendingDenials are the denials among the events b has sent and no one
// has read yet.
func pendingDenials(b *box) []Event {
	var denied []Event
	for {
		select {
		case ev := <-b.events:
			if ev.Decision == Deny {
				denied = append(denied, ev)
			}
			continue
		default:
		}
		return denied
	}
}

// TestGitBrokeredPinned: the real git binary, through the proxy, against
// a real git smart-HTTP server over TLS (a test CA only the proxy
// trusts) on a test host in a network namespace. The agent has only the
// token's placeholder; a Basic-form inject puts the token in, and a
// request rule pins the remote: clone and push to acme/repo.git work,
// with the token arriving at the server; acme/other.git on the same host
// is refused with a 451 before anything reaches the server.
func TestGitBrokeredPinned(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("the git test needs git (apt install git)")
	}
	tn := newTestNet(t)
	const host = "git.test"
	gs := startGitServer(t, tn, host)
	dl := &dialLog{net: tn.subnet, net6: tn.subnet6}
	b := startBoxWith(t, protocol.NetworkSpec{
		Default:       protocol.NetworkDeny,
		AllowRequests: []protocol.RequestRule{{Host: host, Paths: []string{"/acme/repo.git"}}},
	}, Options{
		Guard:   netguard.New(netguard.Options{Open: []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}}),
		Resolve: fakeDNS(map[string][]string{host: {tn.Peer.String()}}),
		Dial:    dl.dial, RootCAs: gs.roots,
		Secrets: []Secret{{Name: "GITHUB_TOKEN", Value: gitToken, Hosts: []string{host}, Form: protocol.InjectFormBasic}},
	})
	for _, kv := range b.env() {
		if strings.Contains(kv, gitToken) {
			t.Fatalf("the real token is in the agent's environment: %s", kv)
		}
	}
	work := t.TempDir()
	agentGit := agentGitOf(b, t.TempDir())
	ph := b.p.Placeholders()["GITHUB_TOKEN"]
	remote := func(repo string) string {
		return "https://" + protocol.InjectBasicUser + ":" + ph + "@" + host + "/acme/" + repo
	}

	out, err := agentGit(work, "clone", "-q", remote("repo.git"), "repo")
	if err != nil {
		t.Fatalf("git clone of the allowed repository: %v\n%s", err, out)
	}
	clone := filepath.Join(work, "repo")
	if b, err := os.ReadFile(filepath.Join(clone, "README")); err != nil || string(b) != "hello\n" {
		t.Fatalf("the clone has README %q, %v", b, err)
	}
	os.WriteFile(filepath.Join(clone, "CHANGE"), []byte("from the agent\n"), 0o644)
	if out, err := agentGit(clone, "add", "CHANGE"); err != nil {
		t.Fatalf("git add: %v\n%s", err, out)
	}
	if out, err := agentGit(clone, "commit", "-q", "-m", "agent change"); err != nil {
		t.Fatalf("git commit: %v\n%s", err, out)
	}
	if out, err := agentGit(clone, "push", "-q", "origin", "main"); err != nil {
		t.Fatalf("git push to the allowed repository: %v\n%s", err, out)
	}
	if got := git(t, filepath.Join(gs.root, "acme/repo.git"), "log", "-1", "--format=%s", "main"); got != "agent change" {
		t.Errorf("the server's acme/repo.git main is at %q, want the agent's commit", got)
	}
	n := checkGitServerSaw(t, gs)

	// Another repository on the same host: refused, readable, and nothing
	// reaches the server.
	out, err = agentGit(work, "clone", "-q", remote("other.git"), "other")
	if err == nil {
		t.Fatal("git clone of another repository on the same host succeeded")
	}
	if !strings.Contains(out, "451") {
		t.Errorf("git clone of another repository: %s, want the 451 it was refused with", out)
	}
	out, err = agentGit(clone, "push", "-q", remote("other.git"), "main")
	if err == nil || !strings.Contains(out, "451") {
		t.Errorf("git push to another repository: %v\n%s, want refused with a 451", err, out)
	}
	// git clone of a traversal spelled into the URL.
	out, err = agentGit(work, "clone", "-q", remote("repo.git/..%2fother.git"), "other2")
	if err == nil {
		t.Errorf("git clone through ..%%2f succeeded: %s", out)
	}
	if _, paths := gs.seen(); len(paths) != n {
		t.Errorf("refused requests reached the server: %v", paths[n:])
	}
	denied := pendingDenials(b)
	if len(denied) == 0 || !strings.Contains(denied[0].Rule, `paths = ["/acme/repo.git"]`) {
		t.Errorf("denials %+v, want the request rule named", denied)
	}
}
