"""groove-reranker-bge: cross-encoder reranking, stage 2 of the groove pipeline."""

__version__ = "0.1.0"
