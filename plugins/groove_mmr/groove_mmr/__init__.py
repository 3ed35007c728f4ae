"""groove-mmr: MMR diversity re-ranking, stage 3 of the groove pipeline."""

__version__ = "0.1.0"
