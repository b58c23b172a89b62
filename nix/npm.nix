# The npm packages of a box ([packages] npm in glovebox.toml), built from
# the lock `gbx generate` writes to dist/npm (package.json and
# package-lock.json) with nixpkgs' own npm tooling: importNpmLock fetches
# every package of the lock by its registry URL and integrity hash, and
# buildNpmPackage runs `npm ci` offline against them (install scripts run
# then too, in the build sandbox: they cannot download). Nothing is
# fetched when the box runs.
#
# The result holds lib/node_modules and bin/, a link to every program the
# packages install, with shebangs patched to the Node.js of the pinned
# nixpkgs; mkBox puts it in the image, so the programs are on the agents'
# PATH (/bin). Native programs some packages ship (the platform packages
# of CLIs written in Rust or Bun) are patched to the image's libraries by
# autoPatchelfHook; libraries a musl build of the same CLI would need are
# not in the image, and are ignored.
{
  pkgs,
  src,
  name,
  nodejs ? pkgs.nodejs,
}:
let
  inherit (pkgs) lib;
in
assert lib.assertMsg (builtins.pathExists (src + "/package.json") && builtins.pathExists (src + "/package-lock.json"))
  "glovebox mkBox (${name}): npm must be a directory with package.json and package-lock.json (dist/npm, written by gbx generate)";
pkgs.buildNpmPackage {
  pname = "${name}-npm-packages";
  version = "0.0.0";
  inherit src nodejs;
  npmDeps = pkgs.importNpmLock { npmRoot = src; };
  npmConfigHook = pkgs.importNpmLock.npmConfigHook;
  dontNpmBuild = true;
  nativeBuildInputs = [ pkgs.autoPatchelfHook ];
  # nodejs for patchShebangs (the programs' #!/usr/bin/env node), the C++
  # runtime for native programs.
  buildInputs = [
    nodejs
    pkgs.stdenv.cc.cc.lib
  ];
  autoPatchelfIgnoreMissingDeps = [ "*" ];
  installPhase = ''
    runHook preInstall
    mkdir -p "$out/lib" "$out/bin"
    cp -r node_modules "$out/lib/node_modules"
    if [ -d "$out/lib/node_modules/.bin" ]; then
      for bin in "$out"/lib/node_modules/.bin/*; do
        ln -s "$bin" "$out/bin/$(basename "$bin")"
      done
    fi
    runHook postInstall
  '';
  meta.description = "npm packages of the Glovebox box ${name}";
}
