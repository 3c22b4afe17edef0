"""neardup: find and remove near-duplicate documents with MinHash LSH."""

__version__ = "0.1.0"
