# The package names the stand-in provides: what Glovebox's flakes and the
# generator's tests may name. Check them against the pinned nixpkgs on a
# machine with network (see verify.nix).
{
  packages = [
    # userland
    "bash"
    "bashInteractive"
    "coreutils"
    "curl"
    "diffutils"
    "file"
    "findutils"
    "gawk"
    "git"
    "gnugrep"
    "gnused"
    "gnutar"
    "gzip"
    "jq"
    "less"
    "procps"
    "ripgrep"
    "unzip"
    "which"
    "xz"
    "zip"
    "cacert"
    "tzdata"
    "tini"
    # media
    "ffmpeg"
    "ffmpeg-headless"
    "ffmpeg-full"
    "imagemagick"
    "imagemagick_light"
    "sox"
    "yt-dlp"
    # docs
    "pandoc"
    "qpdf"
    "pdftk"
    "poppler-utils"
    "ghostscript"
    "libreoffice"
    "libreoffice-fresh"
    "libreoffice-still"
    # python
    "uv"
    # browser and fonts
    "chromium"
    "dejavu_fonts"
    "liberation_ttf"
    "noto-fonts"
    "noto-fonts-cjk-sans"
    "noto-fonts-color-emoji"
    # toolchains and contributor tools
    "gopls"
    "golangci-lint"
    "just"
    "nixfmt"
    "nix"
    "nodejs"
    "nodejs_22"
    "nodejs_24"
    "gcc"
    "skopeo"
    # agents (the goose preset; the others come from npm locks)
    "goose-cli"
  ];

  pythonPackages = [
    "matplotlib"
    "numpy"
    "pandas"
    "pillow"
    "requests"
    "rich"
    "scipy"
  ];
}
