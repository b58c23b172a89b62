"sha256-Ayp+7emrDLyxWpDyWlSFe3U99/P9aG7l5hX9zKoTnLc="
