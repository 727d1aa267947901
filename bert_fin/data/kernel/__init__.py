"""The fast mode's records in C (_kernel.c + _kernel_*.h) and dispatch.py, which picks the C
kernel or the pure-Python reference (same bytes)."""
