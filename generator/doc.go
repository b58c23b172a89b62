// Package generator turns a box config (glovebox.toml) into the artefacts
// that build and deploy the box: a Nix flake and its lock, a nixpacks.toml,
// the manifest (glovebox.json), the box key, .env.example, a fly.toml and a
// Dockerfile.
//
// Load and Parse decode the config strictly: every unknown key, bad size,
// bad duration and bad name is reported with its file and line. Generate is
// a pure function from a Config, a nixpkgs pin and a key to file contents;
// it renders embedded templates in which every interpolated value goes
// through an escaping helper for its language. Write and Diff are the only
// steps that touch the disk: Write replaces a file atomically and only when
// its bytes change, and Diff reports drift without writing.
//
// Packages. packages.nix lists nixpkgs attribute paths, used as is by the
// flake and by nixpacks. packages.pip lists Python package names: the flake
// adds python3Packages.<name> (the name normalised as nixpkgs does: lower
// case, runs of "-", "_" and "." as "-") to the image's python3, and
// nixpacks installs them with pip into a virtual environment. packages.npm
// lists npm packages: nixpacks installs them with `npm install -g`; the Nix
// image has no npm step, so an npm package is only in the Nix image when its
// nixpkgs attribute is also listed under packages.nix (Generate warns).
// packages.apt, v1's list, is refused: apt names are not nixpkgs names.
package generator
