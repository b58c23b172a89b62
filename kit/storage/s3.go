package storage

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/glovebox-dev/glovebox/kit/netguard"
	"github.com/glovebox-dev/glovebox/protocol"
)

// MaxS3Put is the largest object one S3 PUT may carry (5 GiB).
const MaxS3Put int64 = 5 << 30

// S3Options configure the s3 adapter.
type S3Options struct {
	// Endpoint is the service's base URL. Default
	// https://s3.<region>.amazonaws.com. For an S3-compatible server give
	// its URL and usually PathStyle.
	Endpoint string
	// Region signs requests and names the default endpoint. Default
	// us-east-1.
	Region string
	// Bucket and Prefix apply when a rule's options name none. A rule's
	// (or outputs_policy.s3's) bucket, region and prefix win, which v1
	// ignored.
	Bucket string
	Prefix string
	// PathStyle puts the bucket in the path (endpoint/bucket/key) instead
	// of the host name (bucket.endpoint/key).
	PathStyle bool
	// Credentials. SessionToken is optional.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// Client sends the requests. Default: a client with no overall
	// timeout (uploads are bounded by ctx) and a 60s wait for headers.
	Client *http.Client
	// Now is the clock used to date signatures. Default time.Now.
	Now func() time.Time
	// Logger receives one debug line per request. Default: discard.
	Logger *slog.Logger
}

// S3OptionsFromEnv reads the usual AWS variables: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (or
// AWS_DEFAULT_REGION) and AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL).
func S3OptionsFromEnv(getenv func(string) string) S3Options {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := getenv(k); v != "" {
				return v
			}
		}
		return ""
	}
	return S3Options{
		Endpoint:        first("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:          first("AWS_REGION", "AWS_DEFAULT_REGION"),
		AccessKeyID:     getenv("AWS_ACCESS_KEY_ID"),
		SecretAccessKey: getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken:    getenv("AWS_SESSION_TOKEN"),
	}
}

// S3 stores outputs as S3 objects and reads s3 FileRefs, signing requests
// with AWS Signature Version 4 over the standard library. Objects are
// streamed both ways (the payload is sent as UNSIGNED-PAYLOAD, so it is
// never hashed or buffered); one PUT carries at most MaxS3Put bytes.
//
// An output's key is [prefix/]<prompt id>/<name>, as v1.
type S3 struct {
	opts   S3Options
	client *http.Client
	log    *slog.Logger
}

var _ Adapter = (*S3)(nil)

// NewS3 returns an s3 adapter. Credentials are required.
func NewS3(opts S3Options) (*S3, error) {
	if opts.AccessKeyID == "" || opts.SecretAccessKey == "" {
		return nil, errors.New("s3 storage: needs credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if !validRegion(opts.Region) {
		return nil, fmt.Errorf("s3 storage: bad region %q", opts.Region)
	}
	if opts.Endpoint != "" {
		u, err := url.Parse(opts.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("s3 storage: endpoint %q must be an http or https URL", opts.Endpoint)
		}
	}
	if opts.Bucket != "" && !validBucket(opts.Bucket) {
		return nil, fmt.Errorf("s3 storage: bad bucket name %q", opts.Bucket)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &S3{opts: opts, client: opts.Client, log: opts.Logger}
	if a.client == nil {
		// The endpoint is the operator's: it may be on this machine or the
		// private network (MinIO), but never on a link-local, metadata or
		// other special-purpose address, whatever its name resolves to.
		dialer := &net.Dialer{Timeout: 30 * time.Second, Control: netguard.Default().Control(func(c netguard.Closure) bool {
			return c.Class != netguard.Special
		}, nil)}
		a.client = &http.Client{Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			Proxy:                 http.ProxyFromEnvironment,
			ResponseHeaderTimeout: 60 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       30 * time.Second,
		}}
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	return a, nil
}

// Defaults returns the bucket, prefix and region the adapter uses when a
// rule names none.
func (a *S3) Defaults() (bucket, prefix, region string) {
	return a.opts.Bucket, a.opts.Prefix, a.opts.Region
}

// ValidPrefix reports whether p may start an object key: slash-separated
// segments of letters, digits, '.', '_' and '-', none of them "." or
// "..", at most 512 bytes; leading and trailing slashes are ignored.
func ValidPrefix(p string) bool {
	p = strings.Trim(p, "/")
	if p == "" {
		return true
	}
	if len(p) > 512 {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
		for i := 0; i < len(seg); i++ {
			c := seg[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
	}
	return true
}

// CloseIdleConnections closes the adapter's idle keep-alive connections.
func (a *S3) CloseIdleConnections() { a.client.CloseIdleConnections() }

// object is one bucket/key in one region.
type object struct {
	bucket, key, region string
}

func (o object) String() string { return "s3://" + o.bucket + "/" + o.key }

// Put uploads exactly meta.Size bytes from r to
// [prefix/]<prompt id>/<name> in the rule's bucket (options bucket, region
// and prefix, else the adapter's).
func (a *S3) Put(ctx context.Context, meta Meta, r io.Reader) (protocol.FileRef, error) {
	o := object{bucket: a.opts.Bucket, region: a.opts.Region}
	prefix := a.opts.Prefix
	for k, dst := range map[string]*string{"bucket": &o.bucket, "region": &o.region, "prefix": &prefix} {
		if v, ok := meta.Options[k]; ok {
			s, isStr := v.(string)
			if !isStr {
				return protocol.FileRef{}, fmt.Errorf("s3 put %s: option %s must be a string", meta.Name, k)
			}
			if s != "" {
				*dst = s
			}
		}
	}
	if o.bucket == "" {
		return protocol.FileRef{}, fmt.Errorf("s3 put %s: no bucket (set the rule's bucket option)", meta.Name)
	}
	if meta.Size < 0 || meta.Size > MaxS3Put {
		return protocol.FileRef{}, fmt.Errorf("s3 put %s: size %d is outside 0..%d: %w", meta.Name, meta.Size, MaxS3Put, ErrTooLarge)
	}
	// Ids and the prefix become key segments: they are checked, never
	// cleaned (path.Join would resolve a "../" in them).
	if !ValidPrefix(prefix) {
		return protocol.FileRef{}, fmt.Errorf("s3 put %s: prefix %q is not a key prefix (segments of letters, digits, '.', '_' and '-', no \".\" or \"..\")", meta.Name, prefix)
	}
	if meta.PromptID != "" && !ValidID(meta.PromptID) {
		return protocol.FileRef{}, fmt.Errorf("s3 put %s: prompt id %q cannot be a key segment: use letters, digits, '_' and '-' (at most 128)", meta.Name, meta.PromptID)
	}
	for _, seg := range strings.Split(meta.Name, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return protocol.FileRef{}, fmt.Errorf("s3 put %q: the name is not a clean relative path", meta.Name)
		}
	}
	parts := []string{}
	if p := strings.Trim(prefix, "/"); p != "" {
		parts = append(parts, p)
	}
	if meta.PromptID != "" {
		parts = append(parts, meta.PromptID)
	}
	o.key = path.Join(append(parts, meta.Name)...)
	mime := meta.Mime
	if mime == "" {
		mime = protocol.GuessMime(meta.Name)
	}

	body := &countingReader{r: io.LimitReader(r, meta.Size)}
	req, err := a.request(ctx, http.MethodPut, o, body)
	if err != nil {
		return protocol.FileRef{}, fmt.Errorf("s3 put %s: %w", o, err)
	}
	req.ContentLength = meta.Size
	if meta.Size == 0 {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", mime)
	resp, err := a.do(req, o)
	if err != nil {
		if body.n < meta.Size && !errors.Is(err, context.Canceled) {
			return protocol.FileRef{}, fmt.Errorf("s3 put %s: short content: got %d of %d bytes: %w", o, body.n, meta.Size, err)
		}
		return protocol.FileRef{}, fmt.Errorf("s3 put %s: %w", o, err)
	}
	resp.Body.Close()
	if err := checkEOF(r, meta.Size); err != nil {
		// The object holds only the first meta.Size bytes: remove it.
		if derr := a.delete(context.WithoutCancel(ctx), o); derr != nil {
			a.log.Warn("s3 remove partial object", "object", o.String(), "err", derr)
		}
		return protocol.FileRef{}, fmt.Errorf("s3 put %s: %w", o, err)
	}
	return protocol.FileRef{Kind: protocol.KindS3, Name: meta.Name, Mime: mime, Bucket: o.bucket, Key: o.key, Region: o.region}, nil
}

// Open downloads an s3 ref's object. A missing object is ErrNotFound; one
// over max bytes (max > 0) is ErrTooLarge.
func (a *S3) Open(ctx context.Context, ref protocol.FileRef, max int64) (io.ReadCloser, error) {
	if ref.Kind != protocol.KindS3 {
		return nil, fmt.Errorf("s3 adapter cannot read a %s ref (file %q)", ref.Kind, ref.Name)
	}
	o := object{bucket: ref.Bucket, key: ref.Key, region: ref.Region}
	if o.region == "" {
		o.region = a.opts.Region
	}
	req, err := a.request(ctx, http.MethodGet, o, nil)
	if err != nil {
		return nil, fmt.Errorf("s3 get %s: %w", o, err)
	}
	resp, err := a.do(req, o)
	if err != nil {
		return nil, fmt.Errorf("s3 get %s: %w", o, err)
	}
	if max > 0 && resp.ContentLength > max {
		resp.Body.Close()
		return nil, fmt.Errorf("s3 get %s: %d bytes is over %d: %w", o, resp.ContentLength, max, ErrTooLarge)
	}
	if max <= 0 {
		return resp.Body, nil
	}
	return &cappedBody{rc: resp.Body, left: max, max: max, url: o.String()}, nil
}

// delete removes o.
func (a *S3) delete(ctx context.Context, o object) error {
	req, err := a.request(ctx, http.MethodDelete, o, nil)
	if err != nil {
		return err
	}
	resp, err := a.do(req, o)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// request builds a signed request for o.
func (a *S3) request(ctx context.Context, method string, o object, body io.Reader) (*http.Request, error) {
	return a.requestQuery(ctx, method, o, nil, body)
}

// requestQuery builds a signed request for o with a query (a bucket's
// listing has no key).
func (a *S3) requestQuery(ctx context.Context, method string, o object, q url.Values, body io.Reader) (*http.Request, error) {
	if !validBucket(o.bucket) {
		return nil, fmt.Errorf("bad bucket name %q", o.bucket)
	}
	if !validRegion(o.region) {
		return nil, fmt.Errorf("bad region %q", o.region)
	}
	if (o.key == "" && q == nil) || len(o.key) > 1024 || strings.ContainsRune(o.key, 0) {
		return nil, fmt.Errorf("bad key %q", o.key)
	}
	endpoint := a.opts.Endpoint
	if endpoint == "" {
		endpoint = "https://s3." + o.region + ".amazonaws.com"
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(u.Path, "/")
	if a.opts.PathStyle {
		u.Path = base + "/" + o.bucket + "/" + o.key
		u.RawPath = uriEncode(base, false) + "/" + o.bucket + "/" + uriEncode(o.key, false)
	} else {
		u.Host = o.bucket + "." + u.Host
		u.Path = base + "/" + o.key
		u.RawPath = uriEncode(base, false) + "/" + uriEncode(o.key, false)
	}
	u.RawQuery = ""
	if q != nil {
		u.RawQuery = canonicalQuery(q)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	a.sign(req, o.region, a.opts.Now())
	return req, nil
}

// do sends req and turns a non-2xx answer into an error carrying S3's
// error code and message.
func (a *S3) do(req *http.Request, o object) (*http.Response, error) {
	resp, err := a.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	a.log.Debug("s3 request", "method", req.Method, "object", o.String(), "status", resp.StatusCode)
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	xml.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
	msg := resp.Status
	if e.Code != "" {
		msg += ": " + e.Code
		if e.Message != "" {
			msg += ": " + e.Message
		}
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%s: %w", msg, ErrNotFound)
	}
	return nil, errors.New(msg)
}

// sign adds AWS Signature Version 4 headers to req for the s3 service:
// x-amz-date, x-amz-content-sha256 (UNSIGNED-PAYLOAD unless already set),
// x-amz-security-token when there is a session token, and Authorization.
// Host and every x-amz-*, content-type, content-md5, range and date header
// are signed.
func (a *S3) sign(req *http.Request, region string, now time.Time) {
	now = now.UTC()
	amzDate := now.Format("20060102T150405Z")
	day := now.Format("20060102")
	req.Header.Set("X-Amz-Date", amzDate)
	if req.Header.Get("X-Amz-Content-Sha256") == "" {
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	}
	if a.opts.SessionToken != "" {
		req.Header.Set("X-Amz-Security-Token", a.opts.SessionToken)
	}
	signed := map[string]string{"host": req.Host}
	if req.Host == "" {
		signed["host"] = req.URL.Host
	}
	for k, v := range req.Header {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-") || lk == "content-type" || lk == "content-md5" || lk == "range" || lk == "date" {
			vals := make([]string, len(v))
			for i, s := range v {
				vals[i] = strings.Join(strings.Fields(s), " ")
			}
			signed[lk] = strings.Join(vals, ",")
		}
	}
	names := make([]string, 0, len(signed))
	for k := range signed {
		names = append(names, k)
	}
	slices.Sort(names)
	var canon strings.Builder
	canon.WriteString(req.Method + "\n")
	canon.WriteString(req.URL.EscapedPath() + "\n")
	canon.WriteString(canonicalQuery(req.URL.Query()) + "\n")
	for _, k := range names {
		canon.WriteString(k + ":" + signed[k] + "\n")
	}
	signedHeaders := strings.Join(names, ";")
	canon.WriteString("\n" + signedHeaders + "\n")
	canon.WriteString(req.Header.Get("X-Amz-Content-Sha256"))

	scope := day + "/" + region + "/s3/aws4_request"
	sum := sha256.Sum256([]byte(canon.String()))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+a.opts.SecretAccessKey), day)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+a.opts.AccessKeyID+"/"+scope+
		", SignedHeaders="+signedHeaders+", Signature="+sig)
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// canonicalQuery sorts and encodes query parameters as SigV4 wants.
func canonicalQuery(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		vs := slices.Clone(q[k])
		slices.Sort(vs)
		for _, v := range vs {
			parts = append(parts, uriEncode(k, true)+"="+uriEncode(v, true))
		}
	}
	return strings.Join(parts, "&")
}

// uriEncode percent-encodes every byte but A-Z a-z 0-9 - _ . ~ (and "/"
// unless encodeSlash), as SigV4 specifies.
func uriEncode(s string, encodeSlash bool) string {
	const hexdig = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !encodeSlash) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexdig[c>>4])
		b.WriteByte(hexdig[c&15])
	}
	return b.String()
}

// validBucket applies S3's bucket naming rules, which also keep a bucket
// from changing the host a virtual-hosted request goes to.
func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 63 || strings.Contains(b, "..") {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		edge := i == 0 || i == len(b)-1
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || !edge && (c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// validRegion accepts region names such as us-east-1.
func validRegion(r string) bool {
	if r == "" || len(r) > 32 {
		return false
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
