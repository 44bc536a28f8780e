"""The course machinery: how the book teaches and grades (never imported by the model).

Grading and the grading tool, the exercise generator, drills, answer keys, widgets, the
diagram toolkit, notebook helpers, the live-site helpers and the sandbox for student code.
The model library (``scaling_lib`` proper) never imports this package, and importing it
imports nothing heavy.
"""
