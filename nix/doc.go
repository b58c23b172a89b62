// Package nix holds the Go tests of Glovebox's Nix code: the root flake,
// lib.mkBox, the kit and gbx derivations and the base images. The Nix
// itself lives beside this file and in ../baseimages.
//
// The tests evaluate the real flake with Nix against the stand-in nixpkgs
// in testdata/nixpkgs (see internal/nixtest); no package is built with
// Nix, since no nixpkgs is available offline. TestBoxRunsInRunc then runs
// the real kit in a runc container laid out exactly as the evaluated base
// image claims (user, directories, modes, env, entrypoint, manifest).
package nix
