"""partctl: the CLI and the embedded demo, composed from the packages beside it."""

__version__ = "0.1.0"
