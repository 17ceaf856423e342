"""The image scraper of the example gallery (``sphinx_gallery_conf["image_scrapers"]`` in conf.py)."""


def figure_scraper(block, block_vars, gallery_conf, **kwargs):
    """Images of the example's matplotlib Figures, those of :mod:`bayesalign.plot` included.

    ``bayesalign.plot`` builds its figures without pyplot (so it never opens a window), which
    sphinx-gallery's own scraper does not see; this one also saves every such Figure an example holds
    in a variable, once, then runs the pyplot scraper.
    """
    from matplotlib.figure import Figure
    from sphinx_gallery.scrapers import figure_rst, matplotlib_scraper

    example = block_vars["example_globals"]
    shown = example.setdefault("__shown_figures__", set())
    paths = []
    for value in list(example.values()):
        if isinstance(value, Figure) and value.canvas.manager is None and id(value) not in shown:
            shown.add(id(value))
            path = next(block_vars["image_path_iterator"])
            value.savefig(path)
            paths.append(path)
    rst = figure_rst(paths, gallery_conf["src_dir"]) if paths else ""
    return rst + matplotlib_scraper(block, block_vars, gallery_conf, **kwargs)
