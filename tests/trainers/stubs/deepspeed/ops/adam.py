"""Stub: see STUBS in tests/trainers/environment.py."""

from _placeholders import placeholders

__getattr__ = placeholders(__name__)
