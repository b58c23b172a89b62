# python: Python 3 with the scientific stack, and uv. mkBox builds one
# python3.withPackages from these names plus the box's own pythonPackages.
# uv is told to use that Python rather than download one.
{ pkgs }:
{
  description = "Python 3 with numpy, pandas, pillow, scipy, matplotlib; uv";
  packages = with pkgs; [ uv ];
  pythonPackages = [
    "numpy"
    "pandas"
    "pillow"
    "scipy"
    "matplotlib"
  ];
  env = {
    MPLBACKEND = "Agg";
    UV_PYTHON_DOWNLOADS = "never";
  };
}
