"""Code that runs inside the sandbox: the warm worker (zygote), the session runtime, the
confinement layers and the wire format. Standard library only: the worker runs on a bare
interpreter (`python -I -S`), without site-packages and without the rest of astra_verl."""
