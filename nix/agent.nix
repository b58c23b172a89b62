# lib.buildAgent: the kit binary of a box whose agent is written in Go
# (agent.type = "go" in glovebox.toml): the author's main package, which
# calls kit.Main, built with the Go that builds glovebox-kit (nix/go.nix:
# buildGo126Module, CGO off, -trimpath). mkBox takes it as kit; its program
# is glovebox-agent.
#
# src is the Go module (the box directory), main the main package in it
# ("./cmd/myagent"). vendorHash is buildGoModule's: null when the module
# vendors its dependencies or has none; otherwise the hash Nix prints on
# the first build (put it in glovebox.toml as agent.vendor_hash).
#
# supervisor is a package whose bin/ holds glovebox-sandbox, the small
# sandbox supervisor, installed beside glovebox-agent so that the kit
# starts sessions' supervisors from it (default: this flake's
# glovebox-kit; null leaves it out, and the kit re-executes itself). A
# supervisor from another version of glovebox than the agent's module
# is refused at boot by their version check, and the kit falls back.
{ self }:
{
  pkgs,
  src,
  main,
  name,
  version ? "0.1.0",
  vendorHash ? null,
  supervisor ?
    let
      system = pkgs.stdenv.hostPlatform.system;
    in
    if self.packages ? ${system} then self.packages.${system}.glovebox-kit else null,
}:
let
  inherit (pkgs) lib;
  sub = lib.removePrefix "./" main;
in
assert lib.assertMsg (
  lib.hasPrefix "./" main && sub != "" && builtins.match ".*[.][.].*" main == null
) "glovebox buildAgent (${name}): main must be a package path inside the module such as \"./cmd/myagent\", got \"${main}\"";
pkgs.buildGo126Module {
  pname = "${name}-agent";
  inherit version src vendorHash;
  subPackages = [ sub ];
  env.CGO_ENABLED = 0;
  ldflags = [
    "-s"
    "-w"
  ];
  doCheck = false;
  # One main package, one binary: give it the name mkBox runs (unless it
  # has it already, main = "./cmd/glovebox-agent": mv onto itself fails).
  postInstall = ''
    for bin in "$out"/bin/*; do
      if [ "$bin" != "$out/bin/glovebox-agent" ]; then
        mv "$bin" "$out/bin/glovebox-agent"
      fi
    done
  ''
  + lib.optionalString (supervisor != null) ''
    install -m 0555 ${supervisor}/bin/glovebox-sandbox "$out/bin/glovebox-sandbox"
  '';
  meta.mainProgram = "glovebox-agent";
}
