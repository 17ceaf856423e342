"""Sphinx configuration of the bayesalign documentation (``make docs`` builds it with -W)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # gallery_scraper
os.environ.setdefault("OMP_NUM_THREADS", "1")  # the examples run on a shared laptop-sized machine

import bayesalign  # noqa: E402

project = "bayesalign"
author = "the bayesalign developers"
release = version = bayesalign.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
]

autosummary_generate = True
autosummary_imported_members = True
# members a class inherits from bayesalign classes are shown; those of scikit-learn, Python and the stdlib are not
autodoc_default_options = {"members": True, "show-inheritance": True,
                           "inherited-members": "BaseEstimator, Exception, Mapping, tuple"}
autodoc_member_order = "bysource"
autodoc_typehints = "none"
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True  # "Attributes" sections as fields: the properties are documented as members already

sphinx_gallery_conf = {
    "image_scrapers": ("gallery_scraper.figure_scraper",),  # a name: the configuration stays cacheable
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "abort_on_example_error": True,
}

exclude_patterns = ["_build", "examples/README.rst", "Thumbs.db", ".DS_Store"]
html_theme = "alabaster"
html_static_path = ["_static"] if (Path(__file__).parent / "_static").is_dir() else []
html_title = "bayesalign"


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Leave out the members a class inherits from scikit-learn or the standard library (``get_params``,
    metadata routing, ``Mapping.get``): they are documented where they are defined."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    module = getattr(getattr(obj, "fget", obj), "__module__", None)
    if what == "class" and module is not None and not module.startswith("bayesalign"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign_members)
