package protocol

// InspectSpec is the manifest's inspect field: the kit serves a browser
// inspector at /inspect (live sessions, their prompts and frames, display
// slots answered from the page, outputs, the environment) to holders of
// the key or an "inspect" token. Off unless Enabled.
type InspectSpec struct {
	Enabled bool `json:"enabled"`
}

// UploadPath is the route a file is streamed to: PUT UploadPath + name,
// answered with the server FileRef of the stored file (201 Created).
const UploadPath = "/uploads/"
