package kit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"github.com/glovebox-dev/glovebox/kit/route"
	"github.com/glovebox-dev/glovebox/protocol"
)

// maxSBOM bounds the SBOM the kit reads: one of a closure of thousands of
// store paths is a few megabytes.
const maxSBOM = 64 << 20

// SBOMContentType is the media type of GET /sbom's body.
const SBOMContentType = "application/vnd.cyclonedx+json; version=1.6"

// sbomRoute is GET /sbom (key, environment or admin token): the image's
// CycloneDX SBOM, the file the manifest's provenance names, checked
// against the sha256 it gives. A box whose image was not built by mkBox
// (gbx dev, nixpacks) has none and answers 404.
type sbomRoute struct {
	auth route.Auth
	prov *protocol.Provenance // the manifest's; nil: none
	log  *slog.Logger

	// The image's SBOM, read and checked once: the file never changes
	// while the box serves. A failed read is tried again next time.
	mu     sync.Mutex
	body   []byte
	digest string
}

func (sr *sbomRoute) routes() []route.Route {
	return []route.Route{route.Path("/sbom", sr.serve)}
}

func (sr *sbomRoute) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		route.MethodNotAllowed(w, "GET, HEAD")
		return
	}
	if !sr.auth.Admit(w, r, protocol.ScopeEnvironment, protocol.ScopeAdmin) {
		return
	}
	prov := sr.prov
	if prov == nil || prov.SBOM == "" {
		http.Error(w, "this box has no SBOM: only an image built with Nix (gbx build, nix build) carries one", http.StatusNotFound)
		return
	}
	body, digest, err := sr.load()
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "this box has no SBOM: the manifest names "+prov.SBOM+", which the image lacks", http.StatusNotFound)
		return
	}
	if errors.Is(err, errSBOMMismatch) {
		sr.log.Error("sbom: the file does not match the manifest", "path", prov.SBOM, "sha256", digest, "want", prov.SBOMSHA256)
		http.Error(w, "the SBOM at "+prov.SBOM+" does not match the manifest's sbom_sha256", http.StatusInternalServerError)
		return
	}
	if err != nil {
		sr.log.Error("sbom", "path", prov.SBOM, "err", err)
		http.Error(w, "the SBOM could not be read: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("ETag", `"sha256:`+digest+`"`)
	route.Body(w, r, SBOMContentType, "private, no-store", body)
}

// errSBOMMismatch: the SBOM file's sha256 is not the manifest's.
var errSBOMMismatch = errors.New("the SBOM does not match the manifest's sbom_sha256")

// load returns the SBOM and its sha256 (hex), checked against the
// manifest's, reading the file the first time it succeeds.
func (sr *sbomRoute) load() ([]byte, string, error) {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if sr.body != nil {
		return sr.body, sr.digest, nil
	}
	body, err := readSBOM(sr.prov.SBOM)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(body)
	digest := hex.EncodeToString(sum[:])
	if sr.prov.SBOMSHA256 != "" && digest != sr.prov.SBOMSHA256 {
		return nil, digest, errSBOMMismatch
	}
	sr.body, sr.digest = body, digest
	return body, digest, nil
}

func readSBOM(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	body, err := io.ReadAll(io.LimitReader(f, maxSBOM+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxSBOM {
		return nil, errors.New("larger than 64 MiB")
	}
	return body, nil
}
