package storage

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/glovebox-dev/glovebox/protocol"
	"github.com/google/go-cmp/cmp"
)

func TestInlinePut(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		max     int64
		meta    Meta
		body    io.Reader
		want    protocol.FileRef
		wantErr string
		isErr   error
	}{
		{name: "guessed mime", meta: Meta{Name: "a.json", Size: 2}, body: strings.NewReader("{}"),
			want: protocol.FileRef{Kind: "inline", Name: "a.json", Mime: "application/json", Data: "e30="}},
		{name: "given mime", meta: Meta{Name: "a", Mime: "text/x-go", Size: 3}, body: strings.NewReader("abc"),
			want: protocol.FileRef{Kind: "inline", Name: "a", Mime: "text/x-go", Data: "YWJj"}},
		{name: "unknown extension", meta: Meta{Name: "a.xyz", Size: 1}, body: strings.NewReader("a"),
			want: protocol.FileRef{Kind: "inline", Name: "a.xyz", Mime: "application/octet-stream", Data: "YQ=="}},
		{name: "empty", meta: Meta{Name: "e.txt", Size: 0}, body: strings.NewReader(""),
			want: protocol.FileRef{Kind: "inline", Name: "e.txt", Mime: "text/plain", Data: ""}},
		{name: "one byte reads", meta: Meta{Name: "a.txt", Size: 3}, body: iotest.OneByteReader(strings.NewReader("abc")),
			want: protocol.FileRef{Kind: "inline", Name: "a.txt", Mime: "text/plain", Data: "YWJj"}},
		{name: "exactly max", max: 3, meta: Meta{Name: "a.txt", Size: 3}, body: strings.NewReader("abc"),
			want: protocol.FileRef{Kind: "inline", Name: "a.txt", Mime: "text/plain", Data: "YWJj"}},
		{name: "over max", max: 3, meta: Meta{Name: "a.txt", Size: 4}, body: strings.NewReader("abcd"), isErr: ErrTooLarge, wantErr: "over the inline limit of 3"},
		{name: "more than size", meta: Meta{Name: "a.txt", Size: 2}, body: strings.NewReader("abc"), isErr: ErrTooLarge, wantErr: "longer than its declared 2 bytes"},
		{name: "less than size", meta: Meta{Name: "a.txt", Size: 5}, body: strings.NewReader("abc"), wantErr: "short content: got 3 of 5 bytes"},
		{name: "negative size", meta: Meta{Name: "a.txt", Size: -1}, body: strings.NewReader(""), wantErr: "negative size"},
		{name: "reader error", meta: Meta{Name: "a.txt", Size: 3}, body: iotest.ErrReader(errors.New("boom")), wantErr: "boom"},
		{name: "error after content", meta: Meta{Name: "a.txt", Size: 3}, body: io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(errors.New("late"))), wantErr: "late"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := NewInline(tt.max).Put(t.Context(), tt.meta, tt.body)
			if tt.wantErr != "" || tt.isErr != nil {
				if err == nil {
					t.Fatalf("Put = %+v, want an error", ref)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Put error = %q, want it to contain %q", err, tt.wantErr)
				}
				if tt.isErr != nil && !errors.Is(err, tt.isErr) {
					t.Errorf("Put error = %v, want %v", err, tt.isErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if diff := cmp.Diff(tt.want, ref); diff != "" {
				t.Errorf("Put (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInlineDefaultMax(t *testing.T) {
	t.Parallel()
	_, err := NewInline(0).Put(t.Context(), Meta{Name: "big", Size: DefaultInlineMax + 1}, strings.NewReader(""))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("Put over DefaultInlineMax = %v, want ErrTooLarge before reading", err)
	}
}

func TestInlineOpen(t *testing.T) {
	t.Parallel()
	data := []byte("hello, glovebox!") // 16 bytes
	std := base64.StdEncoding.EncodeToString(data)
	tests := []struct {
		name    string
		data    string
		max     int64
		want    []byte
		wantErr string
		isErr   error
	}{
		{name: "padded", data: base64.StdEncoding.EncodeToString([]byte("ab")), want: []byte("ab")},
		{name: "unpadded", data: base64.RawStdEncoding.EncodeToString([]byte("ab")), want: []byte("ab")},
		{name: "url-safe", data: base64.URLEncoding.EncodeToString([]byte{0xfb, 0xff}), want: []byte{0xfb, 0xff}},
		{name: "white space", data: std[:4] + "\n " + std[4:8] + "\r\n\t" + std[8:], want: data},
		{name: "empty", data: "", want: []byte{}},
		{name: "exact max", data: std, max: 16, want: data},
		{name: "over max", data: std, max: 15, isErr: ErrTooLarge},
		{name: "far over max", data: strings.Repeat("A", 4000), max: 10, isErr: ErrTooLarge, wantErr: "over 10 bytes"},
		{name: "not base64", data: "!!!!", wantErr: "not base64"},
		{name: "mixed alphabets, as Node", data: "ab+_", want: mustDecode(t, "ab+/")},
		{name: "stray padding", data: "YQ=\n=", want: []byte("a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc, err := NewInline(0).Open(t.Context(), protocol.FileRef{Kind: "inline", Name: "f", Data: tt.data}, tt.max)
			if tt.wantErr != "" || tt.isErr != nil {
				if err == nil {
					t.Fatal("Open succeeded, want an error")
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Open error = %q, want it to contain %q", err, tt.wantErr)
				}
				if tt.isErr != nil && !errors.Is(err, tt.isErr) {
					t.Errorf("Open error = %v, want %v", err, tt.isErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			if !bytes.Equal(got, tt.want) {
				t.Errorf("Open read %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := NewInline(0).Open(t.Context(), protocol.FileRef{Kind: "url", Name: "f", URL: "http://x/"}, 0); err == nil {
		t.Error("inline Open of a url ref succeeded")
	}
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzInlineOpen(f *testing.F) {
	for _, s := range []string{"", "YQ==", "YQ", "-_-_", "a b\nc=", "====", "YWJj\x00"} {
		f.Add(s, int64(0))
		f.Add(s, int64(2))
	}
	f.Fuzz(func(t *testing.T, data string, max int64) {
		rc, err := NewInline(0).Open(t.Context(), protocol.FileRef{Kind: "inline", Name: "f", Data: data}, max)
		want, decErr := protocol.DecodeBase64(data)
		if err != nil {
			if decErr == nil && (max <= 0 || int64(len(want)) <= max) {
				t.Fatalf("Open(%q, %d) = %v, but the data decodes to %d bytes", data, max, err, len(want))
			}
			return
		}
		got, _ := io.ReadAll(rc)
		if decErr != nil || !bytes.Equal(got, want) {
			t.Fatalf("Open(%q) read %q, DecodeBase64 gives %q, %v", data, got, want, decErr)
		}
		if max > 0 && int64(len(got)) > max {
			t.Fatalf("Open(%q, %d) read %d bytes, over max", data, max, len(got))
		}
	})
}
