package kit

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/glovebox-dev/glovebox/kit/storage"
	"github.com/glovebox-dev/glovebox/protocol"
)

// EnvAdapters returns the storage adapters the environment configures, for
// glovebox-kit and `gbx dev` alike: s3 when AWS credentials are set
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
// AWS_REGION, AWS_ENDPOINT_URL_S3), with the bucket and prefix rules fall
// back to in GLOVEBOX_S3_BUCKET and GLOVEBOX_S3_PREFIX, and
// GLOVEBOX_S3_PATH_STYLE=1 for S3-compatible servers. When the manifest's
// storage policy uses s3 and credentials are missing, the error names the
// variables to set; gcs and azure, which the kit does not implement, are
// refused with what to use instead.
func EnvAdapters(getenv func(string) string, m *protocol.Manifest, log *slog.Logger) (map[string]storage.Adapter, error) {
	uses := map[string]bool{}
	if m != nil {
		for _, r := range append(append([]protocol.Rule(nil), m.StoragePolicy.Inputs.Rules...), m.StoragePolicy.Outputs.Rules...) {
			uses[r.Use.Adapter] = true
		}
	}
	for _, name := range []string{protocol.AdapterGCS, "azure"} {
		if uses[name] {
			return nil, fmt.Errorf("storage: the policy uses %q, which this kit does not implement: use s3 (Google Cloud Storage speaks it at https://storage.googleapis.com with HMAC keys: set AWS_ENDPOINT_URL_S3 to that and use = \"s3\") or localServer", name)
		}
	}
	var missing []string
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if getenv(k) == "" {
			missing = append(missing, k)
		}
	}
	switch {
	case len(missing) > 0 && uses[protocol.AdapterS3]:
		return nil, fmt.Errorf("storage: the policy uses s3, but %s %s not set: set the bucket's credentials as secrets (and AWS_REGION, AWS_ENDPOINT_URL_S3 for other S3 services)", strings.Join(missing, " and "), map[bool]string{true: "is", false: "are"}[len(missing) == 1])
	case len(missing) > 0:
		return nil, nil
	}
	opts := storage.S3OptionsFromEnv(getenv)
	opts.Bucket = getenv("GLOVEBOX_S3_BUCKET")
	opts.Prefix = getenv("GLOVEBOX_S3_PREFIX")
	opts.PathStyle = getenv("GLOVEBOX_S3_PATH_STYLE") == "1"
	opts.Logger = log
	s3, err := storage.NewS3(opts)
	if err != nil {
		return nil, err
	}
	return map[string]storage.Adapter{protocol.AdapterS3: s3}, nil
}
