"""One module of the package, carried like the rest."""
KIND = "minitorch"
