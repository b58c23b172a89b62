package storage

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Objects by key in the adapter's bucket, for stores that name their own
// keys (kit/snapshot). Keys are used as given: the caller makes them.

func (a *S3) object(key string) object {
	return object{bucket: a.opts.Bucket, key: key, region: a.opts.Region}
}

// PutObject uploads exactly size bytes from r to key, in one PUT.
func (a *S3) PutObject(ctx context.Context, key string, size int64, r io.Reader) error {
	o := a.object(key)
	if size < 0 || size > MaxS3Put {
		return fmt.Errorf("s3 put %s: size %d is outside 0..%d: %w", o, size, MaxS3Put, ErrTooLarge)
	}
	body := &countingReader{r: io.LimitReader(r, size)}
	req, err := a.request(ctx, http.MethodPut, o, body)
	if err != nil {
		return fmt.Errorf("s3 put %s: %w", o, err)
	}
	req.ContentLength = size
	if size == 0 {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := a.do(req, o)
	if err != nil {
		return fmt.Errorf("s3 put %s: %w", o, err)
	}
	resp.Body.Close()
	if body.n != size {
		a.delete(context.WithoutCancel(ctx), o)
		return fmt.Errorf("s3 put %s: short content: got %d of %d bytes", o, body.n, size)
	}
	return nil
}

// GetObject downloads key; a missing key is ErrNotFound.
func (a *S3) GetObject(ctx context.Context, key string) (io.ReadCloser, error) {
	o := a.object(key)
	req, err := a.request(ctx, http.MethodGet, o, nil)
	if err != nil {
		return nil, fmt.Errorf("s3 get %s: %w", o, err)
	}
	resp, err := a.do(req, o)
	if err != nil {
		return nil, fmt.Errorf("s3 get %s: %w", o, err)
	}
	return resp.Body, nil
}

// HasObject reports whether key exists (HEAD).
func (a *S3) HasObject(ctx context.Context, key string) (bool, error) {
	o := a.object(key)
	req, err := a.request(ctx, http.MethodHead, o, nil)
	if err != nil {
		return false, fmt.Errorf("s3 head %s: %w", o, err)
	}
	resp, err := a.do(req, o)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("s3 head %s: %w", o, err)
	}
	resp.Body.Close()
	return true, nil
}

// DeleteObject removes key.
func (a *S3) DeleteObject(ctx context.Context, key string) error {
	o := a.object(key)
	if err := a.delete(ctx, o); err != nil {
		return fmt.Errorf("s3 delete %s: %w", o, err)
	}
	return nil
}

// ListKeys lists the keys under prefix (ListObjectsV2, every page), at
// most max.
func (a *S3) ListKeys(ctx context.Context, prefix string, max int) ([]string, error) {
	o := a.object("")
	var keys []string
	token := ""
	for {
		q := url.Values{"list-type": {"2"}, "prefix": {prefix}}
		if token != "" {
			q.Set("continuation-token", token)
		}
		req, err := a.requestQuery(ctx, http.MethodGet, o, q, nil)
		if err != nil {
			return nil, fmt.Errorf("s3 list %s: %w", o, err)
		}
		resp, err := a.do(req, o)
		if err != nil {
			return nil, fmt.Errorf("s3 list s3://%s/%s: %w", o.bucket, prefix, err)
		}
		var page struct {
			Contents []struct {
				Key string `xml:"Key"`
			} `xml:"Contents"`
			IsTruncated           bool   `xml:"IsTruncated"`
			NextContinuationToken string `xml:"NextContinuationToken"`
		}
		err = xml.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&page)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("s3 list s3://%s/%s: %w", o.bucket, prefix, err)
		}
		for _, c := range page.Contents {
			keys = append(keys, c.Key)
		}
		if len(keys) > max {
			return nil, fmt.Errorf("s3 list s3://%s/%s: more than %d keys", o.bucket, prefix, max)
		}
		if !page.IsTruncated || page.NextContinuationToken == "" {
			return keys, nil
		}
		token = page.NextContinuationToken
	}
}
