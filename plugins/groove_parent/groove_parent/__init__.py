"""groove-parent: parent-retriever expansion, stage 4 of the groove pipeline."""

__version__ = "0.1.0"
