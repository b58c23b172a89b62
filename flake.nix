{
  description = "Glovebox: an AI agent and its tools as an isolated, network-addressable service";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;

      version = "0.1.0";
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = f: lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});

      bases = [
        "base"
        "media"
        "docs"
        "python"
        "browser"
      ];

      # One example box per base image, with an example manifest whose key
      # fingerprint is that of the key "glovebox-example-key".
      boxes =
        pkgs:
        lib.genAttrs bases (
          base:
          self.lib.mkBox {
            inherit pkgs base version;
            name = "glovebox/${base}";
            manifest = ./baseimages/manifests + "/${base}.json";
          }
        );
    in
    {
      lib = {
        # mkBox { pkgs, name, manifest, base ? "base", baseName ? null, packages ? [ ],
        #         pythonPackages ? [ ], env ? { }, version ? "0.1.0",
        #         tag ? version, kit ? this flake's glovebox-kit,
        #         npm ? null, sbomTool ? this flake's glovebox-sbom }
        # passthru.sbom is the image's SBOM and stamped manifest.
        mkBox = import ./nix/mkbox.nix { inherit self; };
        # buildAgent { pkgs, src, main, name, version ? "0.1.0", vendorHash ? null,
        #              supervisor ? this flake's glovebox-kit }:
        # a Go agent's own kit binary, with glovebox-sandbox beside it, to
        # pass to mkBox as kit.
        buildAgent = import ./nix/agent.nix { inherit self; };
        inherit bases version;

        # The built-in bases in the shape another flake exposes its own
        # with: gloveboxBases.<name> = { pkgs }: { description; packages;
        # pythonPackages ? [ ]; env ? { }; }. mkBox takes one as base (with
        # baseName as its label), and `base = "<flakeref>#<name>"` in
        # glovebox.toml names one in another flake.
        gloveboxBases = lib.genAttrs bases (base: import (./baseimages + "/${base}.nix"));
      };

      packages = forAllSystems (
        pkgs:
        let
          go = import ./nix/go.nix { inherit pkgs version; };
        in
        {
          inherit (go) glovebox-kit gbx glovebox-sbom;
          default = go.gbx;
        }
        // lib.mapAttrs' (base: image: lib.nameValuePair "box-${base}" image) (boxes pkgs)
      );

      devShells = forAllSystems (pkgs: {
        default = import ./nix/devshell.nix { inherit pkgs version; };
      });

      checks = forAllSystems (
        pkgs:
        let
          go = import ./nix/go.nix { inherit pkgs version; };
        in
        {
          go-test = go.tests;
          images = import ./nix/check-images.nix {
            inherit pkgs;
            images = boxes pkgs;
          };
        }
      );

      formatter = forAllSystems (pkgs: pkgs.nixfmt);
    };
}
