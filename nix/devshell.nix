# devShells.default: the contributor toolchain. `nix develop`, then the
# justfile recipes. The C compiler is there for `go test -race` (cgo);
# fortify hardening is off because cgo compiles the race runtime's helpers
# at -O0, where _FORTIFY_SOURCE warns.
{ pkgs, version }:
let
  go = (import ./go.nix { inherit pkgs version; }).go;
in
pkgs.mkShell {
  name = "glovebox-dev";
  packages = with pkgs; [
    go
    gopls
    golangci-lint
    just
    nixfmt
    nodejs_24 # the ACP test agent installs with npm
    stdenv.cc
    skopeo # inspect and convert images without a daemon
  ];
  hardeningDisable = [ "fortify" ];
}
