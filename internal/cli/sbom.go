package cli

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/glovebox-dev/glovebox/internal/sbom"
)

var sbomCommand = command{
	name:    "sbom",
	summary: "print the SBOM of a built image or a running box (CycloneDX 1.6)",
	run:     runSBOM,
}

// imageSBOMPath is where mkBox puts the SBOM in an image, without the
// leading slash as layer tars name it.
const imageSBOMPath = "etc/glovebox/" + sbom.SBOMFile

// maxSBOMSize bounds an SBOM read from an image.
const maxSBOMSize = 64 << 20

func runSBOM(ctx context.Context, stdio IO, args []string) error {
	var bf boxFlags
	var format string
	fs := newFlags(stdio, "sbom", "sbom [IMAGE | --url URL --key KEY | --box NAME] [--format json|table]\n\n"+
		"Prints the box's SBOM: every store path of its image's Nix closure with its\n"+
		"name, version, license and NAR hash (CycloneDX 1.6 JSON). IMAGE is what gbx\n"+
		"build or nix build made: dist/result (the script that streams the image; it\n"+
		"runs, nothing is loaded into Docker), an image tarball (docker save, or the\n"+
		"script's output), or the SBOM's own build (nix build .#default.sbom). Without\n"+
		"IMAGE it asks a running box (GET /sbom). The Nix image has one, so has the\n"+
		"Dockerfile's (it unpacks that image); a box run by gbx dev or nixpacks has none."+"\n"+endpointsHelp)
	bf.register(fs)
	fs.StringVar(&format, "format", "json", "json (the document) or table (name, version, license)")
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if format != "json" && format != "table" {
		return fmt.Errorf("%w: --format %q: want json or table", ErrUsage, format)
	}
	var doc []byte
	switch fs.NArg() {
	case 0:
		c, b, err := bf.open(stdio)
		if err != nil {
			return err
		}
		defer c.Close()
		if doc, err = b.SBOM(ctx); err != nil {
			return err
		}
	case 1:
		if bf.url != "" || bf.box != "" {
			return fmt.Errorf("%w: give an image or a box (--url, --box), not both", ErrUsage)
		}
		var err error
		if doc, err = imageSBOM(ctx, absPath(stdio, fs.Arg(0))); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: sbom takes at most one image", ErrUsage)
	}
	if format == "json" {
		_, err := stdio.Stdout.Write(doc)
		if err == nil && !bytes.HasSuffix(doc, []byte("\n")) {
			_, err = io.WriteString(stdio.Stdout, "\n")
		}
		return err
	}
	var bom sbom.Document
	if err := json.Unmarshal(doc, &bom); err != nil {
		return fmt.Errorf("the SBOM is not CycloneDX JSON: %w", err)
	}
	return sbomTable(stdio.Stdout, &bom)
}

// imageSBOM finds the SBOM of a built image at p: the directory of the
// SBOM's build, an SBOM file, an image tarball, or the script that
// streams one.
func imageSBOM(ctx context.Context, p string) ([]byte, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	if st.IsDir() {
		doc, err := os.ReadFile(filepath.Join(p, sbom.SBOMFile))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s holds no %s: give the image (dist/result), its tarball, or the SBOM's build (nix build .#default.sbom)", p, sbom.SBOMFile)
		}
		return doc, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	head, _ := r.Peek(2)
	switch {
	case len(head) > 0 && head[0] == '{':
		return io.ReadAll(io.LimitReader(r, maxSBOMSize))
	case string(head) == "#!" && st.Mode()&0o111 != 0:
		return streamedSBOM(ctx, p)
	}
	return tarSBOM(r, p)
}

// streamedSBOM runs the script nix build made of a streamed image
// (dockerTools.streamLayeredImage) and reads the SBOM from the image it
// writes.
func streamedSBOM(ctx context.Context, script string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", script, err)
	}
	doc, findErr := tarSBOM(out, script)
	io.Copy(io.Discard, out) // let the script finish writing
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	return doc, findErr
}

// tarSBOM reads an image tarball (docker save's or an OCI archive, each
// layer a tar, compressed or not) and returns the SBOM from the last
// layer that holds one.
func tarSBOM(r io.Reader, name string) ([]byte, error) {
	tr := tar.NewReader(r)
	var doc []byte
	entries := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if entries == 0 {
				return nil, fmt.Errorf("%s is not an image: not a directory, an SBOM, a tarball or the script of a streamed image", name)
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		entries++
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if found, ok := layerSBOM(tr); ok {
			doc = found
		}
	}
	if doc == nil {
		return nil, fmt.Errorf("%s has no /%s: its image was not built by glovebox's mkBox, or predates SBOMs", name, imageSBOMPath)
	}
	return doc, nil
}

// layerSBOM reads one entry of an image tarball as a layer and returns
// the SBOM file in it, if it is a layer and holds one.
func layerSBOM(r io.Reader) ([]byte, bool) {
	br := bufio.NewReader(r)
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, false
		}
		defer zr.Close()
		return layerSBOM(zr)
	}
	tr := tar.NewReader(br)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, false
		}
		if h.Typeflag == tar.TypeReg && path.Clean(strings.TrimPrefix(h.Name, "/")) == imageSBOMPath {
			doc, err := io.ReadAll(io.LimitReader(tr, maxSBOMSize))
			return doc, err == nil
		}
	}
}

// sbomTable prints an SBOM's image and one row per component.
func sbomTable(w io.Writer, bom *sbom.Document) error {
	if c := bom.Metadata.Component; c != nil {
		fmt.Fprintf(w, "%s %s: %d store paths\n", c.Name, c.Version, len(bom.Components))
	}
	for _, p := range bom.Metadata.Properties {
		if p.Name == "glovebox:closure_sha256" {
			fmt.Fprintf(w, "closure sha256 %s\n", p.Value)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tLICENSE")
	for _, c := range bom.Components {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, orDash(c.Version), orDash(licenseText(c.Licenses)))
	}
	return tw.Flush()
}

func licenseText(ls []sbom.LicenseChoice) string {
	var parts []string
	for _, l := range ls {
		switch {
		case l.Expression != "":
			parts = append(parts, l.Expression)
		case l.License != nil:
			parts = append(parts, l.License.Name)
		}
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
