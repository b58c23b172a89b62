# A stand-in for nixpkgs, for evaluating Glovebox's flakes offline.
#
# It exposes the attribute paths our flakes use (lib, legacyPackages.<system>,
# buildGoModule, dockerTools, python3.withPackages, the packages the base
# images name, ...). Every package is a trivial derivation that is never meant
# to be built; every function asserts the arguments it requires and records
# what it was called with under `standIn`, so tests can read it back with
# `nix eval --json`.
#
# Names follow nixos-26.05. Where nixpkgs renamed or removed a package, the
# stand-in throws like the real aliases do, so a stale name fails here too.
{
  description = "stand-in nixpkgs for offline evaluation of Glovebox flakes";

  outputs =
    { self }:
    let
      lib = import ./lib.nix;
    in
    {
      inherit lib;
      legacyPackages = lib.genAttrs [
        "x86_64-linux"
        "aarch64-linux"
      ] (system: import ./pkgs.nix { inherit lib system; });
    };
}
