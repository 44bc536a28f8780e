"""The course: how the book is taught and graded (grading, keys, widgets, diagrams, ...).

The model library (``scaling_lib`` proper) never imports this package.
"""
