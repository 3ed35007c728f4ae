"""Retrieval-quality evaluation on golden queries."""
