# media: audio and video. ffmpeg-headless is ffmpeg without the X11/SDL
# players, and the variant yt-dlp already wraps, so the two share one
# closure.
{ pkgs }:
{
  description = "ffmpeg, ImageMagick, SoX, yt-dlp";
  packages = with pkgs; [
    ffmpeg-headless
    imagemagick
    sox
    yt-dlp
  ];
  pythonPackages = [ ];
  env = { };
}
