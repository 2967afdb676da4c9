"""livetrans: an OpenAI-compatible streaming translation server for live captions."""

__version__ = "0.1.0"
