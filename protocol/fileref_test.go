package protocol_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/protocol"
)

// TestFileRefJSON checks each kind's v1 shape: exactly its fields, in v1
// order, optional ones left out when empty.
func TestFileRefJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ref  protocol.FileRef
		want string
	}{
		{"inline", protocol.FileRef{Kind: "inline", Name: "a.txt", Mime: "text/plain", Data: "aGk="},
			`{"kind":"inline","name":"a.txt","mime":"text/plain","data":"aGk="}`},
		{"inline keeps empty mime and data", protocol.FileRef{Kind: "inline", Name: "e"},
			`{"kind":"inline","name":"e","mime":"","data":""}`},
		{"url", protocol.FileRef{Kind: "url", Name: "r.csv", Mime: "text/csv", URL: "https://example.com/r.csv", Headers: map[string]string{"X-Token": "abc"}},
			`{"kind":"url","name":"r.csv","mime":"text/csv","url":"https://example.com/r.csv","headers":{"X-Token":"abc"}}`},
		{"url without mime and headers", protocol.FileRef{Kind: "url", Name: "r", URL: "http://h/r"},
			`{"kind":"url","name":"r","url":"http://h/r"}`},
		{"server", protocol.FileRef{Kind: "server", Name: "b.bin", Mime: "application/octet-stream", Size: 2097152, ID: "3111c8c2", URL: "http://localhost:8080/files/3111c8c2"},
			`{"kind":"server","name":"b.bin","mime":"application/octet-stream","size":2097152,"id":"3111c8c2","url":"http://localhost:8080/files/3111c8c2"}`},
		{"server keeps zero size and empty mime", protocol.FileRef{Kind: "server", Name: "z", ID: "i", URL: "/files/i"},
			`{"kind":"server","name":"z","mime":"","size":0,"id":"i","url":"/files/i"}`},
		{"s3", protocol.FileRef{Kind: "s3", Name: "c.mp4", Mime: "video/mp4", Bucket: "bk", Key: "p/req_1/c.mp4", Region: "us-east-1"},
			`{"kind":"s3","name":"c.mp4","mime":"video/mp4","bucket":"bk","key":"p/req_1/c.mp4","region":"us-east-1"}`},
		{"s3 without mime and region", protocol.FileRef{Kind: "s3", Name: "c", Bucket: "bk", Key: "k"},
			`{"kind":"s3","name":"c","bucket":"bk","key":"k"}`},
		{"gcs", protocol.FileRef{Kind: "gcs", Name: "g", Mime: "text/plain", Bucket: "bk", Object: "o/g"},
			`{"kind":"gcs","name":"g","mime":"text/plain","bucket":"bk","object":"o/g"}`},
		{"fields of other kinds are not written", protocol.FileRef{Kind: "inline", Name: "x", Mime: "m", Data: "", URL: "http://h", Size: 3, Bucket: "b", Key: "k", Object: "o"},
			`{"kind":"inline","name":"x","mime":"m","data":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.ref)
			if err != nil || string(got) != tt.want {
				t.Errorf("json.Marshal(%+v) = %s, %v, want %s", tt.ref, got, err, tt.want)
			}
			var back protocol.FileRef
			if err := json.Unmarshal([]byte(tt.want), &back); err != nil {
				t.Fatalf("json.Unmarshal(%s) error = %v", tt.want, err)
			}
			again, err := json.Marshal(back)
			if err != nil || string(again) != tt.want {
				t.Errorf("json.Marshal(json.Unmarshal(%s)) = %s, %v, want the same", tt.want, again, err)
			}
		})
	}
}

func TestFileRefMarshalError(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"", "ftp", "INLINE"} {
		ref := protocol.FileRef{Kind: kind, Name: "x"}
		if got, err := json.Marshal(ref); err == nil {
			t.Errorf("json.Marshal(kind %q) = %s, want an error", kind, got)
		}
	}
}

func TestFileRefUnmarshal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want protocol.FileRef
	}{
		{"inline", `{"kind":"inline","name":"a","mime":"text/plain","data":"aGk="}`,
			protocol.FileRef{Kind: "inline", Name: "a", Mime: "text/plain", Data: "aGk="}},
		{"unknown fields ignored", `{"kind":"inline","name":"a","mime":"m","data":"","sha256":"x","size":9}`,
			protocol.FileRef{Kind: "inline", Name: "a", Mime: "m"}},
		{"fields of other kinds dropped", `{"kind":"url","name":"a","url":"https://h/a","data":"aGk=","bucket":"b"}`,
			protocol.FileRef{Kind: "url", Name: "a", URL: "https://h/a"}},
		{"server size as float", `{"kind":"server","name":"a","mime":"m","size":1e3,"id":"i","url":"http://h/files/i"}`,
			protocol.FileRef{Kind: "server", Name: "a", Mime: "m", Size: 1000, ID: "i", URL: "http://h/files/i"}},
		{"server without size", `{"kind":"server","name":"a","mime":"m","id":"i","url":"/files/i"}`,
			protocol.FileRef{Kind: "server", Name: "a", Mime: "m", ID: "i", URL: "/files/i"}},
		{"s3", `{"kind":"s3","name":"a","bucket":"b","key":"k"}`,
			protocol.FileRef{Kind: "s3", Name: "a", Bucket: "b", Key: "k"}},
		{"gcs", `{"kind":"gcs","name":"a","bucket":"b","object":"o"}`,
			protocol.FileRef{Kind: "gcs", Name: "a", Bucket: "b", Object: "o"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got protocol.FileRef
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatalf("json.Unmarshal(%s) error = %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("json.Unmarshal(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestFileRefRequiredFields checks that each kind's required fields are
// required, with an error that names the file and what is missing.
func TestFileRefRequiredFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		wantMsg string
	}{
		{`{"name":"a"}`, `file "a": missing kind (want inline, url, server, s3 or gcs)`},
		{`{"kind":"ftp","name":"a"}`, `file "a": unknown kind "ftp" (want inline, url, server, s3 or gcs)`},
		{`{"kind":"Inline","name":"a","data":""}`, `file "a": unknown kind "Inline"`},
		{`{"kind":"inline","name":"a","data":"$$$$"}`, `inline file "a": data is not base64`},
		{`{"kind":"url","name":"a"}`, `url file "a": url "": scheme must be http or https`},
		{`{"kind":"url","name":"a","url":"file:///etc/passwd"}`, `url file "a": url "file:///etc/passwd": scheme must be http or https`},
		{`{"kind":"url","name":"a","url":"https://"}`, `url file "a": url "https://": missing host`},
		{`{"kind":"url","name":"a","url":"http://h/%zz"}`, `url file "a": bad url`},
		{`{"kind":"url","name":"a","url":"http://h","headers":{"X":1}}`, `protocol: bad file ref: json: cannot unmarshal number`},
		{`{"kind":"server","name":"a","url":"http://h/files/i"}`, `server file "a": needs id and url`},
		{`{"kind":"server","name":"a","id":"i"}`, `server file "a": needs id and url`},
		{`{"kind":"server","name":"a","id":"i","url":"u","size":-1}`, `server file "a": size must be a whole number of bytes`},
		{`{"kind":"server","name":"a","id":"i","url":"u","size":0.5}`, `server file "a": size must be a whole number of bytes`},
		{`{"kind":"server","name":"a","id":"i","url":"u","size":1e300}`, `server file "a": size must be a whole number of bytes`},
		{`{"kind":"server","name":"a","id":"i","url":"u","size":"12"}`, `protocol: bad file ref: json: cannot unmarshal string`},
		{`{"kind":"s3","name":"a","bucket":"b"}`, `s3 file "a": needs bucket and key`},
		{`{"kind":"s3","name":"a","key":"k"}`, `s3 file "a": needs bucket and key`},
		{`{"kind":"gcs","name":"a","bucket":"b"}`, `gcs file "a": needs bucket and object`},
		{`{"kind":"inline","name":7}`, `protocol: bad file ref: json: cannot unmarshal number`},
		{`"inline"`, `protocol: bad file ref: json: cannot unmarshal string`},
		{`[]`, `protocol: bad file ref: json: cannot unmarshal array`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got protocol.FileRef
			err := json.Unmarshal([]byte(tt.in), &got)
			if !errors.Is(err, protocol.ErrBadFileRef) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("json.Unmarshal(%s) = %+v, %v, want an error wrapping %v containing %q", tt.in, got, err, protocol.ErrBadFileRef, tt.wantMsg)
			}
		})
	}
}

// TestFileRefUnmarshalKeepsValue checks that a failed decode leaves the
// destination untouched.
func TestFileRefUnmarshalKeepsValue(t *testing.T) {
	t.Parallel()
	ref := protocol.FileRef{Kind: "inline", Name: "keep", Data: "aGk="}
	want := ref
	if err := ref.UnmarshalJSON([]byte(`{"kind":"s3","name":"x"}`)); err == nil {
		t.Fatal("UnmarshalJSON(s3 without bucket) error = nil, want an error")
	}
	if diff := cmp.Diff(want, ref); diff != "" {
		t.Errorf("FileRef after a failed UnmarshalJSON (-want +got):\n%s", diff)
	}
}

// TestDecodeBase64 checks v1's lenient base64: standard or URL-safe, padded
// or not, white space ignored.
func TestDecodeBase64(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{"aGkgdGhlcmU=", "hi there"},
		{"aGkgdGhlcmU", "hi there"},
		{"aGkgdGhlcmU==", "hi there"},
		{"aGkg\ndGhl\r\ncmU=\t ", "hi there"},
		{"", ""},
		{"+/8=", "\xfb\xff"},
		{"-_8=", "\xfb\xff"},
		{"-_8", "\xfb\xff"},
		{"+_8", "\xfb\xff"}, // both alphabets at once, as Node's decoder takes it
		{"-/8", "\xfb\xff"},
		{"AA", "\x00"},
	}
	for _, tt := range tests {
		got, err := protocol.DecodeBase64(tt.in)
		if err != nil || string(got) != tt.want {
			t.Errorf("DecodeBase64(%q) = %q, %v, want %q, nil", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"a", "aGk=x", "a=b=", "!!!!", "aGk\x00", "€€€€"} {
		if got, err := protocol.DecodeBase64(in); err == nil {
			t.Errorf("DecodeBase64(%q) = %q, nil, want an error", in, got)
		}
	}
}

func TestFileRefBytes(t *testing.T) {
	t.Parallel()
	ref := protocol.InlineRef("a.bin", "application/octet-stream", []byte{0, 1, 2, 0xff})
	if want := "AAEC/w=="; ref.Data != want {
		t.Errorf("InlineRef(...).Data = %q, want %q (standard base64 with padding)", ref.Data, want)
	}
	got, err := ref.Bytes()
	if err != nil || string(got) != "\x00\x01\x02\xff" {
		t.Errorf("Bytes() = %q, %v, want the original bytes", got, err)
	}
	server := protocol.FileRef{Kind: "server", Name: "s", ID: "i", URL: "u"}
	if _, err := server.Bytes(); err == nil || err.Error() != `file "s" is a server ref, not inline` {
		t.Errorf("Bytes() of a server ref error = %v, want file \"s\" is a server ref, not inline", err)
	}
}

func TestGuessMime(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, want string }{
		{"a.json", "application/json"},
		{"a.txt", "text/plain"},
		{"A.PDF", "application/pdf"},
		{"x.tar.gz", "application/gzip"},
		{"photo.JPEG", "image/jpeg"},
		{"noext", "application/octet-stream"},
		{"trailing.", "application/octet-stream"},
		{".bashrc", "application/octet-stream"},
		{"a.exe", "application/octet-stream"},
	}
	for _, tt := range tests {
		if got := protocol.GuessMime(tt.name); got != tt.want {
			t.Errorf("GuessMime(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}
