# browser: headless Chromium with fonts for rendering pages, including CJK
# and colour emoji. nixpkgs' chromium rather than Playwright's browsers: no
# driver version to keep equal to an npm package. In a container, run it
# with --headless=new --no-sandbox (agents run under unprivileged uids, usually without user
# namespaces) and
# give the container a larger /dev/shm or pass --disable-dev-shm-usage.
{ pkgs }:
let
  fonts = import ../nix/fonts.nix {
    inherit pkgs;
    fonts = with pkgs; [
      dejavu_fonts
      liberation_ttf
      noto-fonts
      noto-fonts-cjk-sans
      noto-fonts-color-emoji
    ];
  };
  chrome = "${pkgs.chromium}/bin/chromium";
in
{
  description = "Chromium with fonts for headless rendering";
  packages = [ pkgs.chromium ] ++ fonts.packages;
  pythonPackages = [ ];
  env = fonts.env // {
    CHROME_PATH = chrome;
    GLOVE_CHROMIUM_PATH = chrome;
  };
}
