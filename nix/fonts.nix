# Fonts for headless rendering (LibreOffice, Chromium): the font packages
# plus a fontconfig file naming them, exported as FONTCONFIG_FILE.
{ pkgs, fonts }:
{
  packages = fonts;
  env.FONTCONFIG_FILE = "${pkgs.makeFontsConf { fontDirectories = fonts; }}";
}
