"""groove embedders and a reranker backend behind an HTTP endpoint."""

__version__ = "0.1.0"
