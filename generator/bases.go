package generator

// baseSpec is what a base image adds on top of the kit, as nixpacks builds
// need it: nixpacks cannot start from the Nix base images, so it installs
// the same packages itself. The table mirrors baseimages/<base>.nix;
// TestBasesMatchNix evaluates those files and fails when they drift apart.
type baseSpec struct {
	// Nix are nixpkgs attribute names.
	Nix []string
	// Pip are Python packages (python3Packages names in the Nix image,
	// installed with pip in nixpacks builds).
	Pip []string
	// Env are the base's environment variables that do not name store
	// paths (those exist only in the Nix image).
	Env map[string]string
}

var baseSpecs = map[string]baseSpec{
	"base": {Nix: []string{
		"bashInteractive", "coreutils", "findutils", "diffutils", "gnugrep", "gnused", "gawk",
		"gnutar", "gzip", "xz", "which", "less", "procps", "curl", "tzdata",
	}},
	"media": {Nix: []string{"ffmpeg-headless", "imagemagick", "sox", "yt-dlp"}},
	"docs": {Nix: []string{
		"pandoc", "qpdf", "pdftk", "poppler-utils", "ghostscript", "libreoffice",
		"dejavu_fonts", "liberation_ttf", "noto-fonts",
	}},
	"python": {
		Nix: []string{"uv"},
		Pip: []string{"numpy", "pandas", "pillow", "scipy", "matplotlib"},
		Env: map[string]string{"MPLBACKEND": "Agg", "UV_PYTHON_DOWNLOADS": "never"},
	},
	"browser": {Nix: []string{
		"chromium", "dejavu_fonts", "liberation_ttf", "noto-fonts", "noto-fonts-cjk-sans", "noto-fonts-color-emoji",
	}},
}
