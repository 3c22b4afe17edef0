"""The version, in a leaf module that imports nothing."""

__version__ = "0.1.0"
