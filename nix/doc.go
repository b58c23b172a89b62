// Package nix holds the Go tests of Glovebox's Nix code: the root flake,
// lib.mkBox, the kit and gbx derivations and the base images. The Nix
// itself lives beside this file and in ../baseimages.
//
// The tests evaluate the real flake with Nix against the stand-in nixpkgs
// in testdata/nixpkgs (see internal/nixtest); nothing here builds a
// package, since no nixpkgs is available offline.
package nix
