# A flake exposing a Glovebox base, in the shape of the root flake's
# lib.gloveboxBases. The flakebase box's tests pass it in place of
# github:acme/glovebox-bases.
{
  description = "example Glovebox bases";

  outputs =
    { self }:
    {
      lib.gloveboxBases.ml =
        { pkgs }:
        {
          description = "ripgrep, unzip and numpy";
          packages = [
            pkgs.ripgrep
            pkgs.unzip
          ];
          pythonPackages = [ "numpy" ];
          env = {
            ML_HOME = "/opt/ml";
          };
        };
    };
}
