# docs: document conversion and PDF tools.
#
# LibreOffice dominates this image: its closure is about 1.7 GB (nixpkgs
# trimmed it from 2.4 GB in 2021), against about 250 MB for pandoc. There is
# no headless variant; `soffice --headless` works with the normal build.
# Shrinking it with an override (e.g. withHelp = false) misses the binary
# cache and means building LibreOffice from source for hours, so we don't.
# LibreOffice writes its profile under HOME, which mkBox makes writable.
{ pkgs }:
let
  fonts = import ../nix/fonts.nix {
    inherit pkgs;
    fonts = with pkgs; [
      dejavu_fonts
      liberation_ttf
      noto-fonts
    ];
  };
in
{
  description = "pandoc, qpdf, pdftk, poppler-utils, Ghostscript, LibreOffice";
  packages =
    with pkgs;
    [
      pandoc
      qpdf
      pdftk # the Java port; pulls a JRE
      poppler-utils # pdftotext, pdfinfo, pdftoppm (poppler_utils is the old alias)
      ghostscript
      libreoffice
    ]
    ++ fonts.packages;
  pythonPackages = [ ];
  env = fonts.env;
}
