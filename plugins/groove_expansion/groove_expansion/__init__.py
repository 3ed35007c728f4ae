"""groove-expansion: query expansion by pseudo-relevance feedback, an extra lexical leg."""

__version__ = "0.1.0"
