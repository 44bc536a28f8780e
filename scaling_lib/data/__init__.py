"""Measurements shipped with the library (read with ``importlib.resources``); see each folder's
README for its source and licence."""
