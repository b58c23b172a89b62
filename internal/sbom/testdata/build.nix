# nix/sbom.nix built for real, with the few nixpkgs functions it calls
# written here as plain derivations (no nixpkgs on this machine): an
# application that refers to one output of a library, its SBOM and
# stamped manifest.
# closureInfo is nixpkgs' own script (pkgs/build-support/closure-info.nix),
# with jq and coreutils from the machine.
{
  # The repository, glovebox-sbom's bin/ directory and a manifest.
  root,
  tool,
  manifest,
}:
let
  system = builtins.currentSystem;
  lib = import (root + "/nix/testdata/nixpkgs/lib.nix");
  sh = script: {
    builder = "/bin/sh";
    args = [
      "-c"
      ("export PATH=/usr/bin:/bin; " + script)
    ];
  };

  pkgs = {
    inherit lib;
    writeText = name: text: builtins.toFile name text;
    runCommand =
      name: env: script:
      derivation (
        builtins.removeAttrs env [ "passthru" "nativeBuildInputs" ]
        // sh ("export PATH=${lib.makeBinPath env.nativeBuildInputs}:$PATH; " + script)
        // { inherit name system; }
      );
    closureInfo =
      { rootPaths }:
      derivation {
        name = "closure-info";
        inherit system;
        __structuredAttrs = true;
        exportReferencesGraph.closure = rootPaths;
        builder = "/bin/bash";
        args = [
          "-c"
          ''
            export PATH=/usr/bin:/bin
            source "$NIX_ATTRS_SH_FILE"
            out=''${outputs[out]}
            mkdir $out
            jq -r ".closure | map(.narSize) | add" < "$NIX_ATTRS_JSON_FILE" > $out/total-nar-size
            jq -r '.closure | map([.path, .narHash, .narSize, "", (.references | length)] + .references) | add | map("\(.)\n") | add' < "$NIX_ATTRS_JSON_FILE" | head -n -1 > $out/registration
            jq -r '.closure[].path' < "$NIX_ATTRS_JSON_FILE" > $out/store-paths
          ''
        ];
      };
  };

  # A library with two outputs, of which the application uses one; a
  # bare-string license, as some packages give.
  libb =
    derivation (
      {
        name = "libb-1.0";
        inherit system;
        outputs = [
          "out"
          "lib"
        ];
      }
      // sh "echo b > $out; echo l > $lib"
    )
    // {
      pname = "libb";
      version = "1.0";
      meta.license = "Some License";
    };
  appa =
    derivation ({ name = "appa-2.0"; inherit system; } // sh "mkdir -p $out/bin; echo ${libb.lib} > $out/bin/appa")
    // {
      pname = "appa";
      version = "2.0";
      meta = {
        description = "an application";
        license = {
          spdxId = "MIT";
          fullName = "MIT License";
        };
      };
    };
in
import (root + "/nix/sbom.nix") {
  inherit pkgs manifest;
  name = "acme/box";
  version = "1.0";
  roots = [ appa ];
  packages = [
    appa
    libb
  ];
  tool = builtins.path {
    path = tool;
    name = "glovebox-sbom";
  };
}
