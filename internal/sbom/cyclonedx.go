package sbom

// The subset of CycloneDX 1.6 (JSON) an SBOM of a Nix closure uses.
// Field names and shapes follow bom-1.6.schema.json; the tests validate
// the output against that schema.

// Document is a CycloneDX BOM.
type Document struct {
	Schema       string       `json:"$schema"`
	BOMFormat    string       `json:"bomFormat"`
	SpecVersion  string       `json:"specVersion"`
	SerialNumber string       `json:"serialNumber,omitempty"`
	Version      int          `json:"version"`
	Metadata     Metadata     `json:"metadata"`
	Components   []Component  `json:"components"`
	Dependencies []Dependency `json:"dependencies"`
}

// Metadata says what the BOM describes (the image) and what made it.
type Metadata struct {
	Tools      *Tools     `json:"tools,omitempty"`
	Component  *Component `json:"component,omitempty"`
	Properties []Property `json:"properties,omitempty"`
}

// Tools are the programs that made the BOM.
type Tools struct {
	Components []Component `json:"components"`
}

// Component is one component: a store path, or the image itself.
type Component struct {
	Type               string              `json:"type"`
	BOMRef             string              `json:"bom-ref,omitempty"`
	Name               string              `json:"name"`
	Version            string              `json:"version,omitempty"`
	Description        string              `json:"description,omitempty"`
	Hashes             []Hash              `json:"hashes,omitempty"`
	Licenses           []LicenseChoice     `json:"licenses,omitempty"`
	Purl               string              `json:"purl,omitempty"`
	ExternalReferences []ExternalReference `json:"externalReferences,omitempty"`
	Properties         []Property          `json:"properties,omitempty"`
}

// Hash is a component's hash; for a store path, its NAR hash.
type Hash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

// LicenseChoice is either a License or an SPDX expression.
// LicenseChoice is either a license or an SPDX expression.
type LicenseChoice struct {
	License    *License `json:"license,omitempty"`
	Expression string   `json:"expression,omitempty"`
}

// License is a license by name.
type License struct {
	Name string `json:"name"`
	URL  string `json:"url,omitempty"`
}

// ExternalReference is a link, such as a package's homepage.
type ExternalReference struct {
	Type string `json:"type"`
	URL  string `json:"url"`
}

// Property is a name-value pair (nix:store_path, glovebox:closure_sha256, ...).
type Property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Dependency lists what one component refers to.
type Dependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn,omitempty"`
}
