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
// lists npm packages, locked into dist/npm (npm.go): the Nix image builds
// them from that lock with importNpmLock, nixpacks runs npm ci from it.
// [agent] preset brings a coding agent's package, command, brokered key,
// egress policy and limits (presets.go).
// packages.apt, v1's list, is refused: apt names are not nixpkgs names.
//
// Locking. flake.nix follows nixpkgs' nixos-26.05 branch and the glovebox
// flake (github:glovebox-dev/glovebox, its nixpkgs following ours).
// flake.lock pins nixpkgs to a verified revision from the embedded pins
// table, so Nix never re-resolves the branch and nixpacks' nixpkgsArchive
// names the same commit. The glovebox input's narHash cannot be known
// before a release exists, so the lock leaves it out unless a release pin
// is stamped into gbx with -ldflags (see ReleasePin): the first networked
// `nix flake lock` or `nix build` adds it, and committing that lock pins
// it from then on.
package generator
