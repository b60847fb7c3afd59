"""Tandem: local chat sped up by speculative decoding, with every round on show."""

__version__ = "0.1.0"
APP_NAME = "tandem"
