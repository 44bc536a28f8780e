"""Interactive explorers for the chapters (ipywidgets + matplotlib, imported lazily).

Each module has a plotting function that draws on a matplotlib Axes (used for the static figure
every chapter draws at default settings, and tested) and an ``explorer()`` that wraps it in
ipywidgets controls. No logic lives only in a widget.
"""
