"sha256-GJIy3Fzj6inY5QkzK0iCj1q3xumo+eE+Vh9MkQtAVVA="
