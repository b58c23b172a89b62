package protocol_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"strings"
	"testing"

	"github.com/glovebox-dev/glovebox/protocol"
)

// checkBase64Reader holds NewBase64Reader to DecodeBase64: the same bytes,
// or the same error.
func checkBase64Reader(t *testing.T, s string) {
	t.Helper()
	want, wantErr := protocol.DecodeBase64(s)
	got, err := io.ReadAll(protocol.NewBase64Reader(s))
	if err != wantErr {
		t.Fatalf("reading %.80q: error %v, want %v (DecodeBase64's)", s, err, wantErr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("reading %.80q: %d bytes differ from DecodeBase64's %d", s, len(got), len(want))
	}
}

// TestBase64ReaderBlocks decodes data longer than one block, with white
// space, padding and errors on either side of a block's end.
func TestBase64ReaderBlocks(t *testing.T) {
	data := make([]byte, 20000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	std := base64.StdEncoding.EncodeToString(data)
	url := base64.URLEncoding.EncodeToString(data)
	spaced := strings.ReplaceAll(std, "A", "A \r\n\t")
	for _, s := range []string{
		std, url, spaced, std + " = \n", strings.TrimRight(std, "="),
		std[:4095] + "!" + std[4096:], std[:4096] + "*" + std[4097:], std[:9000] + "=" + std[9000:],
		spaced[:6001] + "\x00" + spaced[6001:], std[:4097], std[:8193] + "==",
	} {
		checkBase64Reader(t, s)
	}
	if b, err := io.ReadAll(protocol.NewBase64Reader(spaced)); err != nil || !bytes.Equal(b, data) {
		t.Errorf("reading spaced base64 = %d bytes, %v; want the %d bytes encoded", len(b), err, len(data))
	}
	if _, err := io.ReadAll(protocol.NewBase64Reader(std[:9000] + "=" + std[9000:])); err != base64.CorruptInputError(9000) {
		t.Errorf("reading base64 with \"=\" at 9000: error %v, want illegal data at 9000", err)
	}
}

func FuzzBase64Reader(f *testing.F) {
	for _, s := range []string{"aGk=", "aGk", "-_8", "+/8=", " a G k = ", "a", "=", "", "aG=k", "aGk\n=\n", strings.Repeat("QUJD", 1100) + " Q"} {
		f.Add(s)
	}
	f.Fuzz(checkBase64Reader)
}
