"""crac: transparent checkpoint/restart for GPU programs (CRAC split-process design)."""

__version__ = "0.1.0"
