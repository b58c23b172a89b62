# Checks the stand-in's names against a real nixpkgs. Needs network and a
# real Nix; evaluates to the list of problems, [ ] when all is well:
#
#   nix eval --json --impure --expr 'import ./nix/testdata/nixpkgs/verify.nix {
#     nixpkgs = builtins.getFlake "github:NixOS/nixpkgs/78e9c786dc08cd4f3420c2395cd977206a9b1da2"; }'
#
# The tests run it against the stand-in itself, where it must also give [ ].
{
  nixpkgs,
  system ? "x86_64-linux",
}:
let
  names = import ./names.nix;
  pkgs = nixpkgs.legacyPackages.${system};
  exists = set: name: (builtins.tryEval (set ? ${name} && (set.${name}.type or null) == "derivation")).value or false;
  missing = prefix: set: list: map (n: "${prefix}${n}") (builtins.filter (n: !(exists set n)) list);
  functions = {
    "buildGo126Module" = pkgs ? buildGo126Module;
    "go_1_26" = pkgs ? go_1_26;
    "dockerTools.streamLayeredImage" = pkgs.dockerTools ? streamLayeredImage;
    "dockerTools.fakeNss.override" = pkgs.dockerTools.fakeNss ? override;
    "dockerTools.caCertificates" = pkgs.dockerTools ? caCertificates;
    "dockerTools.usrBinEnv" = pkgs.dockerTools ? usrBinEnv;
    "python3.withPackages" = pkgs.python3 ? withPackages;
    "makeFontsConf" = pkgs ? makeFontsConf;
    "mkShell" = pkgs ? mkShell;
    "writeText" = pkgs ? writeText;
    "runCommand" = pkgs ? runCommand;
    "closureInfo" = pkgs ? closureInfo;
    "lib.cleanSourceWith" = nixpkgs.lib ? cleanSourceWith;
    "lib.attrByPath" = nixpkgs.lib ? attrByPath;
    "buildNpmPackage" = pkgs ? buildNpmPackage;
    "importNpmLock" = pkgs ? importNpmLock;
    "importNpmLock.npmConfigHook" = pkgs.importNpmLock ? npmConfigHook;
    "autoPatchelfHook" = pkgs ? autoPatchelfHook;
    "stdenv.cc.cc.lib" = pkgs.stdenv.cc.cc ? lib;
  };
in
missing "" pkgs names.packages
++ missing "python3Packages." pkgs.python3Packages names.pythonPackages
++ map (n: "function ${n}") (builtins.filter (n: !functions.${n}) (builtins.attrNames functions))
