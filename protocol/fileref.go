package protocol

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// FileRef kinds.
const (
	KindInline = "inline" // base64 bytes in the message
	KindURL    = "url"    // a URL the receiver fetches (inputs only)
	KindServer = "server" // a file parked on the box, read through GET /files/{id}
	KindS3     = "s3"     // an object in S3
	KindGCS    = "gcs"    // an object in Google Cloud Storage
)

// FileRef names a file without carrying raw bytes outside a protocol field.
// It is a discriminated union on Kind; which fields are set depends on the
// kind, and MarshalJSON writes exactly the v1 fields of that kind in v1
// order.
type FileRef struct {
	Kind string
	Name string
	Mime string

	Data string // inline: standard base64 with padding

	URL     string            // url, server
	Headers map[string]string // url: request headers for the fetch

	Size int64  // server: byte length
	ID   string // server: the /files id

	Bucket string // s3, gcs
	Key    string // s3
	Region string // s3, optional
	Object string // gcs
}

// InlineRef returns an inline FileRef holding data.
func InlineRef(name, mime string, data []byte) FileRef {
	return FileRef{Kind: KindInline, Name: name, Mime: mime, Data: base64.StdEncoding.EncodeToString(data)}
}

// Bytes decodes an inline ref's data. It accepts standard and URL-safe
// base64, padded or not, and ignores white space, as v1 does.
func (r FileRef) Bytes() ([]byte, error) {
	if r.Kind != KindInline {
		return nil, fmt.Errorf("file %q is a %s ref, not inline", r.Name, r.Kind)
	}
	return DecodeBase64(r.Data)
}

// DecodeBase64 decodes standard or URL-safe base64 (or the two mixed), with
// or without padding and with white space ignored.
func DecodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, " \t\r\n") {
		s = strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
				return -1
			}
			return r
		}, s)
	}
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		// Node's decoder, which v1 uses, also takes the two alphabets mixed.
		s = strings.NewReplacer("-", "+", "_", "/").Replace(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// Validate reports whether the ref has the fields its kind requires.
func (r FileRef) Validate() error {
	switch r.Kind {
	case KindInline:
		// Checked a block at a time: an inline file's size in memory
		// stays its frame's.
		if _, err := io.Copy(io.Discard, NewBase64Reader(r.Data)); err != nil {
			return fmt.Errorf("inline file %q: data is not base64: %w", r.Name, err)
		}
	case KindURL:
		if err := checkHTTPURL(r.URL); err != nil {
			return fmt.Errorf("url file %q: %w", r.Name, err)
		}
	case KindServer:
		if r.ID == "" || r.URL == "" {
			return fmt.Errorf("server file %q: needs id and url", r.Name)
		}
		if r.Size < 0 {
			return fmt.Errorf("server file %q: negative size", r.Name)
		}
	case KindS3:
		if r.Bucket == "" || r.Key == "" {
			return fmt.Errorf("s3 file %q: needs bucket and key", r.Name)
		}
	case KindGCS:
		if r.Bucket == "" || r.Object == "" {
			return fmt.Errorf("gcs file %q: needs bucket and object", r.Name)
		}
	case "":
		return fmt.Errorf("file %q: missing kind (want inline, url, server, s3 or gcs)", r.Name)
	default:
		return fmt.Errorf("file %q: unknown kind %q (want inline, url, server, s3 or gcs)", r.Name, r.Kind)
	}
	return nil
}

func checkHTTPURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("bad url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url %q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return fmt.Errorf("url %q: missing host", s)
	}
	return nil
}

type inlineWire struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	Mime string `json:"mime"`
	Data string `json:"data"`
}

type urlWire struct {
	Kind    string            `json:"kind"`
	Name    string            `json:"name"`
	Mime    string            `json:"mime,omitempty"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

type serverWire struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	Mime string `json:"mime"`
	Size int64  `json:"size"`
	ID   string `json:"id"`
	URL  string `json:"url"`
}

type s3Wire struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Mime   string `json:"mime,omitempty"`
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Region string `json:"region,omitempty"`
}

type gcsWire struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Mime   string `json:"mime,omitempty"`
	Bucket string `json:"bucket"`
	Object string `json:"object"`
}

// MarshalJSON writes the v1 fields of the ref's kind, in v1 order.
func (r FileRef) MarshalJSON() ([]byte, error) {
	switch r.Kind {
	case KindInline:
		return marshal(inlineWire{r.Kind, r.Name, r.Mime, r.Data})
	case KindURL:
		return marshal(urlWire{r.Kind, r.Name, r.Mime, r.URL, r.Headers})
	case KindServer:
		return marshal(serverWire{r.Kind, r.Name, r.Mime, r.Size, r.ID, r.URL})
	case KindS3:
		return marshal(s3Wire{r.Kind, r.Name, r.Mime, r.Bucket, r.Key, r.Region})
	case KindGCS:
		return marshal(gcsWire{r.Kind, r.Name, r.Mime, r.Bucket, r.Object})
	}
	return nil, fmt.Errorf("protocol: cannot encode file %q of kind %q", r.Name, r.Kind)
}

// fileRefWire is the union of every kind's fields, for decoding.
type fileRefWire struct {
	Kind    string            `json:"kind"`
	Name    string            `json:"name"`
	Mime    string            `json:"mime"`
	Data    string            `json:"data"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Size    *float64          `json:"size"`
	ID      string            `json:"id"`
	Bucket  string            `json:"bucket"`
	Key     string            `json:"key"`
	Region  string            `json:"region"`
	Object  string            `json:"object"`
}

// ErrBadFileRef wraps every FileRef decoding error.
var ErrBadFileRef = errors.New("protocol: bad file ref")

// UnmarshalJSON decodes a ref and checks the fields its kind requires.
func (r *FileRef) UnmarshalJSON(b []byte) error {
	var w fileRefWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("%w: %v", ErrBadFileRef, err)
	}
	ref := FileRef{Kind: w.Kind, Name: w.Name, Mime: w.Mime}
	switch w.Kind {
	case KindInline:
		ref.Data = w.Data
	case KindURL:
		ref.URL, ref.Headers = w.URL, w.Headers
	case KindServer:
		ref.ID, ref.URL = w.ID, w.URL
		if w.Size != nil {
			if *w.Size < 0 || *w.Size != float64(int64(*w.Size)) {
				return fmt.Errorf("%w: server file %q: size must be a whole number of bytes", ErrBadFileRef, w.Name)
			}
			ref.Size = int64(*w.Size)
		}
	case KindS3:
		ref.Bucket, ref.Key, ref.Region = w.Bucket, w.Key, w.Region
	case KindGCS:
		ref.Bucket, ref.Object = w.Bucket, w.Object
	}
	if err := ref.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrBadFileRef, err)
	}
	*r = ref
	return nil
}

// mimeTypes is v1's guessMime table, by lowercased extension.
var mimeTypes = map[string]string{
	".json": "application/json",
	".txt":  "text/plain",
	".md":   "text/markdown",
	".pdf":  "application/pdf",
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".gif":  "image/gif",
	".webp": "image/webp",
	".mp4":  "video/mp4",
	".webm": "video/webm",
	".mp3":  "audio/mpeg",
	".wav":  "audio/wav",
	".html": "text/html",
	".csv":  "text/csv",
	".svg":  "image/svg+xml",
	".zip":  "application/zip",
	".xml":  "application/xml",
	".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
	".ogg":  "audio/ogg",
	".flac": "audio/flac",
	".mov":  "video/quicktime",
	".tar":  "application/x-tar",
	".gz":   "application/gzip",
}

// GuessMime returns the MIME type for a file name by its extension, the v1
// table extended with a few common kinds; application/octet-stream otherwise.
func GuessMime(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		if m, ok := mimeTypes[strings.ToLower(name[i:])]; ok {
			return m
		}
	}
	return "application/octet-stream"
}
