"""Ready subjects: real kernels behind the calling convention (docs/python.md)."""
