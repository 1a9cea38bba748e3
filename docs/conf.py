"""Sphinx configuration: the documentation of torch-xla-jax (built by scripts/docs, with
warnings as errors; scripts/test runs it in CI)."""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

project = "torch-xla-jax"
author = "torch-xla-jax contributors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
# Headings become link targets (`page.md#section`) for the pages' links to each other.
myst_heading_anchors = 3
# The generated reports (operator coverage, upstream's tests) are written by their scripts
# whole; their headings start at a level of their own.
suppress_warnings = ["myst.header"]

# The API reference: pages generated from the public modules' docstrings.
autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_member_order = "bysource"
autodoc_typehints = "none"
# A subclass's method without a docstring of its own (an autograd.Function's forward) is
# not given PyTorch's, whose references point into PyTorch's documentation.
autodoc_inherit_docstrings = False
# `name` in the docstrings is code, as in Markdown.
default_role = "code"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

html_theme = "alabaster"
html_title = "torch-xla-jax"
