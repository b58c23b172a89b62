package storage

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/glovebox-dev/glovebox/internal/testkit"
	"github.com/glovebox-dev/glovebox/protocol"
)

// AWS's published Signature Version 4 examples for S3
// (sig-v4-header-based-auth, "Example signature calculations").
func TestS3SignExamples(t *testing.T) {
	t.Parallel()
	a := &S3{opts: S3Options{AccessKeyID: "AKIAIOSFODNN7EXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}}
	when := time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)
	const empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	tests := []struct {
		name          string
		method, url   string
		headers       map[string]string
		signedHeaders string
		signature     string
	}{
		{
			name: "GET object", method: "GET", url: "https://examplebucket.s3.amazonaws.com/test.txt",
			headers:       map[string]string{"Range": "bytes=0-9", "X-Amz-Content-Sha256": empty},
			signedHeaders: "host;range;x-amz-content-sha256;x-amz-date",
			signature:     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
		},
		{
			name: "PUT object", method: "PUT", url: "https://examplebucket.s3.amazonaws.com/test%24file.text",
			headers: map[string]string{
				"Date":                 "Fri, 24 May 2013 00:00:00 GMT",
				"X-Amz-Storage-Class":  "REDUCED_REDUNDANCY",
				"X-Amz-Content-Sha256": "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
			},
			signedHeaders: "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
			signature:     "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
		},
		{
			name: "GET bucket lifecycle", method: "GET", url: "https://examplebucket.s3.amazonaws.com/?lifecycle",
			headers:       map[string]string{"X-Amz-Content-Sha256": empty},
			signedHeaders: "host;x-amz-content-sha256;x-amz-date",
			signature:     "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
		},
		{
			name: "list objects", method: "GET", url: "https://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J",
			headers:       map[string]string{"X-Amz-Content-Sha256": empty},
			signedHeaders: "host;x-amz-content-sha256;x-amz-date",
			signature:     "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			a.sign(req, "us-east-1", when)
			want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, SignedHeaders=" +
				tt.signedHeaders + ", Signature=" + tt.signature
			if got := req.Header.Get("Authorization"); got != want {
				t.Errorf("Authorization =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestS3SignSessionToken(t *testing.T) {
	t.Parallel()
	a := &S3{opts: S3Options{AccessKeyID: "AKID", SecretAccessKey: "secret", SessionToken: "token"}}
	req, err := http.NewRequest("GET", "https://bkt.s3.eu-west-1.amazonaws.com/a%20b.txt", nil)
	if err != nil {
		t.Fatal(err)
	}
	a.sign(req, "eu-west-1", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	auth := req.Header.Get("Authorization")
	for _, want := range []string{
		"Credential=AKID/20260102/eu-west-1/s3/aws4_request",
		"SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,",
	} {
		if !strings.Contains(auth, want) {
			t.Errorf("Authorization = %q, want it to contain %q", auth, want)
		}
	}
	if req.Header.Get("X-Amz-Security-Token") != "token" || req.Header.Get("X-Amz-Content-Sha256") != "UNSIGNED-PAYLOAD" || req.Header.Get("X-Amz-Date") != "20260102T030405Z" {
		t.Errorf("signed headers = %v", req.Header)
	}
}

func TestS3Names(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		bucket string
		ok     bool
	}{
		{"glovebox-outputs", true}, {"a.b.c", true}, {"abc", true},
		{"ab", false}, {"Upper", false}, {"-lead", false}, {"trail-", false}, {"a..b", false},
		{"evil.com/x", false}, {"evil.com#", false}, {"a b", false}, {strings.Repeat("a", 64), false},
	} {
		if got := validBucket(tt.bucket); got != tt.ok {
			t.Errorf("validBucket(%q) = %v, want %v", tt.bucket, got, tt.ok)
		}
	}
	if got, want := uriEncode("a b/$c~d_é", false), "a%20b/%24c~d_%C3%A9"; got != want {
		t.Errorf("uriEncode = %q, want %q", got, want)
	}
	if got, want := uriEncode("a/b", true), "a%2Fb"; got != want {
		t.Errorf("uriEncode(slash) = %q, want %q", got, want)
	}
}

func TestNewS3Errors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		opts S3Options
		want string
	}{
		{"no credentials", S3Options{}, "needs credentials"},
		{"bad region", S3Options{AccessKeyID: "k", SecretAccessKey: "s", Region: "us-east-1.evil.com/"}, "bad region"},
		{"bad endpoint", S3Options{AccessKeyID: "k", SecretAccessKey: "s", Endpoint: "ftp://x"}, "must be an http or https URL"},
		{"bad bucket", S3Options{AccessKeyID: "k", SecretAccessKey: "s", Bucket: "Bad_Bucket"}, "bad bucket name"},
	} {
		if _, err := NewS3(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewS3(%s) = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
	got := S3OptionsFromEnv(envMap{
		"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_DEFAULT_REGION": "eu-west-1",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
	}.get)
	if got.AccessKeyID != "id" || got.SecretAccessKey != "secret" || got.Region != "eu-west-1" || got.Endpoint != "http://127.0.0.1:9000" {
		t.Errorf("S3OptionsFromEnv = %+v", got)
	}
}

type envMap map[string]string

func (m envMap) get(k string) string { return m[k] }

// startS3rver runs s3rver (kit/storage's install) with one bucket.
func startS3rver(t *testing.T, bucket string) string {
	return testkit.S3rver(t, filepath.Join("testdata", "s3rver"), bucket)
}

func TestS3Roundtrip(t *testing.T) {
	t.Parallel()
	const bucket = "glovebox-test"
	endpoint := startS3rver(t, bucket)
	a, err := NewS3(S3Options{Endpoint: endpoint, PathStyle: true, Bucket: bucket, AccessKeyID: "S3RVER", SecretAccessKey: "S3RVER", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.CloseIdleConnections()
	big := randomBytes(t, 8<<20)

	tests := []struct {
		name    string
		meta    Meta
		body    io.Reader
		data    []byte
		wantKey string
		wantErr string
	}{
		{name: "small", meta: Meta{Name: "a.txt", PromptID: "p1"}, data: []byte("hello s3"), wantKey: "p1/a.txt"},
		{name: "empty", meta: Meta{Name: "empty.txt", PromptID: "p1"}, data: []byte{}, wantKey: "p1/empty.txt"},
		{name: "odd name", meta: Meta{Name: "sub dir/a+b$c (1).txt", PromptID: "p2"}, data: []byte("odd"), wantKey: "p2/sub dir/a+b$c (1).txt"},
		{name: "prefix option", meta: Meta{Name: "x.bin", PromptID: "p3", Options: map[string]any{"prefix": "/outs/"}}, data: []byte("x"), wantKey: "outs/p3/x.bin"},
		{name: "large, streamed", meta: Meta{Name: "big.bin", PromptID: "p4"}, body: iotest.HalfReader(bytes.NewReader(big)), data: big, wantKey: "p4/big.bin"},
		{name: "short content", meta: Meta{Name: "s.txt", PromptID: "p5", Size: 10}, body: strings.NewReader("abc"), wantErr: "short content: got 3 of 10 bytes"},
		{name: "long content", meta: Meta{Name: "l.txt", PromptID: "p5", Size: 2}, body: strings.NewReader("abc"), wantErr: "longer than its declared 2 bytes"},
		{name: "missing bucket", meta: Meta{Name: "m.txt", Options: map[string]any{"bucket": "no-such-bucket"}}, data: []byte("m"), wantErr: "404 Not Found: NoSuchBucket"},
		{name: "bad bucket", meta: Meta{Name: "m.txt", Options: map[string]any{"bucket": "evil.com/x"}}, data: []byte("m"), wantErr: `bad bucket name "evil.com/x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if body == nil {
				body = bytes.NewReader(tt.data)
			}
			if tt.meta.Size == 0 {
				tt.meta.Size = int64(len(tt.data))
			}
			ref, err := a.Put(t.Context(), tt.meta, body)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Put = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			want := protocol.FileRef{Kind: "s3", Name: tt.meta.Name, Mime: protocol.GuessMime(tt.meta.Name), Bucket: bucket, Key: tt.wantKey, Region: "us-east-1"}
			if diff := cmp.Diff(want, ref); diff != "" {
				t.Errorf("Put (-want +got):\n%s", diff)
			}
			rc, err := a.Open(t.Context(), ref, 0)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, tt.data) {
				t.Errorf("Open read %d bytes, %v; want %d", len(got), err, len(tt.data))
			}
		})
	}

	t.Run("long content leaves no object", func(t *testing.T) {
		_, err := a.Open(t.Context(), protocol.FileRef{Kind: "s3", Name: "n", Bucket: bucket, Key: "p5/l.txt"}, 0)
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Open of the refused upload = %v, want ErrNotFound", err)
		}
	})

	t.Run("open errors", func(t *testing.T) {
		_, err := a.Open(t.Context(), protocol.FileRef{Kind: "s3", Name: "n", Bucket: bucket, Key: "no/such/key"}, 0)
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Open of a missing key = %v, want ErrNotFound", err)
		}
		_, err = a.Open(t.Context(), protocol.FileRef{Kind: "s3", Name: "n", Bucket: bucket, Key: "p4/big.bin"}, 1<<20)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("Open over max = %v, want ErrTooLarge", err)
		}
	})

	t.Run("wrong access key", func(t *testing.T) {
		bad, err := NewS3(S3Options{Endpoint: endpoint, PathStyle: true, Bucket: bucket, AccessKeyID: "NOPE", SecretAccessKey: "x"})
		if err != nil {
			t.Fatal(err)
		}
		defer bad.CloseIdleConnections()
		_, err = bad.Put(t.Context(), Meta{Name: "a.txt", Size: 1}, strings.NewReader("a"))
		if err == nil || !strings.Contains(err.Error(), "403 Forbidden: InvalidAccessKeyId") {
			t.Errorf("Put with an unknown key = %v, want 403 InvalidAccessKeyId", err)
		}
	})

	t.Run("through the registry", func(t *testing.T) {
		r := NewRegistry()
		r.Register(protocol.AdapterS3, a)
		policy := (&protocol.OutputsOverride{S3: &protocol.S3Override{Bucket: bucket, Prefix: "runs"}}).Apply(protocol.DefaultOutputsPolicy())
		ref, err := r.Store(t.Context(), policy, Meta{Name: "report.pdf", Size: 4, PromptID: "p9"}, strings.NewReader("%PDF"))
		if err != nil {
			t.Fatal(err)
		}
		if ref.Kind != "s3" || ref.Key != "runs/p9/report.pdf" || ref.Mime != "application/pdf" {
			t.Errorf("Store = %+v, want s3 runs/p9/report.pdf", ref)
		}
		rc, err := r.Open(t.Context(), ref, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != "%PDF" {
			t.Errorf("read back %q", got)
		}
	})
}
