"""Sphinx configuration: the guide (Markdown, MyST) and the API reference
(autodoc/autosummary from the docstrings).  Build with warnings as errors:

    sphinx-build -W -b html docs docs/_build
"""
import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                '..')))
from pyg_degreembed.version import __version__  # noqa: E402

project = 'pyg_degreembed'
release = version = __version__
extensions = [
    'sphinx.ext.autodoc',
    'sphinx.ext.autosummary',
    'sphinx.ext.napoleon',
    'sphinx.ext.mathjax',
    'myst_parser',
]
source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
exclude_patterns = ['_build', 'generated/*.md']
autosummary_generate = True
autodoc_member_order = 'bysource'
autodoc_default_options = {'members': True, 'ignore-module-all': True}
autodoc_typehints = 'none'  # the docstrings state the types, PyG-style
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
autodoc_inherit_docstrings = False
myst_heading_anchors = 3
myst_enable_extensions = ['dollarmath']
# The guide links to files of the repository outside the docs (benchmarks,
# examples, results): valid on GitHub, not documents of this site.
suppress_warnings = ['myst.xref_missing']
html_theme = 'alabaster'
