"""The comparison suite: every method on every shipped dataset, at several anchor fractions and seeds.

The grid and its parallel runner live here; the cache of finished runs in :mod:`bayesalign._compare_cache`,
the scores of a run and the tables and figures of a comparison in :mod:`bayesalign._compare_tables` (their
public names import from here as well).

For one dataset, anchor fraction and seed, the paired views are split into anchors and held-out
rows (``AlignmentProblem.split_anchors``), the held-out rows of the last view are shuffled
(``shuffle_unaligned``) so that no method can use the row order, and each method of
:mod:`bayesalign.registry` is run through :func:`bayesalign.registry.run_method`. The metrics
(:mod:`bayesalign.metrics`) are computed on the held-out rows, per pair of views, and averaged
over the pairs of a dataset with 3+ views:

``accuracy``  fraction of held-out rows matched to their true partner;
``kendall_tau``  normalised Kendall-tau distance of the matching (0 perfect, about 0.5 random; the
MAD paper's measure); ``top1``, ``top10``  retrieval in the latent space (is the true partner among
the k nearest?); ``foscttm``  fraction of samples closer than the true match; ``ece`` and
``precision_at_50``  calibration of the match probabilities, where a method gives them;
``seconds``  wall time of fit and matching. A method that fails on a dataset is recorded with its
error in the ``error`` column; the suite goes on.

:func:`run_comparison` runs the grid's fits in parallel with joblib (``jobs``; local processes or a
Dask cluster, ``backend="dask"``) and, with ``cache``, keeps every finished run on disk so that an
interrupted or extended comparison fits only what is missing.

Examples
--------
>>> SUITE["mfeat_fou_kar"][:2]
('mfeat', {'views': ('fou', 'kar'), 'n_per_class': 50})
>>> frame = run_comparison(["swiss_roll"], methods=["global-geometry"], fractions=[0.1],
...                        seeds=1, quick=True)  # doctest: +SKIP
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ._compare_cache import _problem_digest, _read_cached, _run_settings, _write_cached
from ._compare_tables import (
    METRICS,
    evaluate_method_result,
    markdown_summary,
    plot_accuracy,
    plot_matched_halves,
    summarize,
    write_results,
)
from ._utils import ctrl_c_held
from .data import AlignmentProblem
from .registry import COMPARE_METHODS, METHODS, get_method, run_method

__all__ = ["BACKENDS", "DEMO_DATASETS", "DEMO_FRACTIONS", "DEMO_METHODS", "FRACTIONS", "METRICS", "QUICK_BAYESIAN",
           "QUICK_DATASETS", "QUICK_FRACTIONS", "SUITE", "check_dataset", "check_method", "dataset_summaries", "demo",
           "evaluate_method_result", "load_dataset", "markdown_summary", "plot_accuracy",
           "plot_matched_halves", "quick_options", "run_comparison", "summarize", "write_results"]

FRACTIONS = (0.05, 0.1, 0.25)
QUICK_FRACTIONS = (0.1, 0.25)

#: The suite's datasets: name -> (loader in ``bayesalign.datasets.DATASETS``, keywords, keywords
#: for ``--quick``; the quick ones keep every dataset but make it small).
SUITE: dict[str, tuple[str, dict, dict]] = {
    "mad_toy_linear_shared": ("mad_toy_linear_shared", {}, {}),
    "mad_toy_linear_shared_private": ("mad_toy_linear_shared_private", {}, {}),
    "mad_toy_nonlinear_shared_private": ("mad_toy_nonlinear_shared_private", {}, {}),
    "swiss_roll": ("swiss_roll", {"n": 500}, {"n": 150}),
    "swiss_roll_warped": ("swiss_roll", {"n": 500, "warp": 0.5}, {"n": 150, "warp": 0.5}),
    "protein": ("protein", {}, {"models": (1, 21)}),
    "mocap": ("mocap", {}, {"step": 3}),
    "digits_halves": ("digits_halves", {}, {"n": 100}),
    "mfeat_fou_kar": ("mfeat", {"views": ("fou", "kar"), "n_per_class": 50}, {"views": ("fou", "kar"),
                                                                               "n_per_class": 12}),
    "mfeat_fac_pix": ("mfeat", {"views": ("fac", "pix"), "n_per_class": 50}, {"views": ("fac", "pix"),
                                                                               "n_per_class": 12}),
    "mfeat_zer_mor": ("mfeat", {"views": ("zer", "mor"), "n_per_class": 50}, {"views": ("zer", "mor"),
                                                                               "n_per_class": 12}),
}


# Datasets and methods ------------------------------------------------------------------------
def dataset_summaries() -> dict[str, str]:
    """Every name ``--dataset`` takes (the suite's and the loaders'), with one line about it."""
    from .datasets import DATASETS

    def first_line(loader) -> str:
        doc = (DATASETS[loader].__doc__ or "").strip().splitlines()
        return doc[0] if doc else ""

    out = {}
    for name, (loader, kwargs, _) in SUITE.items():
        out[name] = f"{first_line(loader)} [{loader}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})]"
    for name in DATASETS:
        out.setdefault(name, first_line(name))
    return out


def check_dataset(name: str) -> None:
    """Raise a ValueError listing the names if ``name`` is not a dataset."""
    from .datasets import DATASETS

    if name not in SUITE and name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; datasets: {', '.join(dataset_summaries())}")


def check_method(name: str) -> None:
    spec = get_method(name)
    if not spec.available:
        raise ValueError(f"method {name!r} is not available in this installation")


def load_dataset(name: str, quick: bool = False) -> AlignmentProblem:
    """The suite's dataset ``name`` (its quick size with ``quick``), or any loader by name."""
    from .datasets import load

    check_dataset(name)
    if name in SUITE:
        loader, kwargs, quick_kwargs = SUITE[name]
        problem = load(loader, **(quick_kwargs if quick else kwargs))
    else:
        problem = load(name)
    return problem.replace(name=name)


# Running ---------------------------------------------------------------------------------------
def run_comparison(datasets: Mapping[str, str | AlignmentProblem] | Sequence[str], methods=None,
                   fractions=None, seeds=None, quick: bool = False, latent_dim=None, device=None,
                   log: Callable[[str], None] | None = None, progress: bool = False,
                   collect: dict | None = None, jobs: int = 1, backend: str = "loky", scheduler: str | None = None,
                   cache=None, progress_bar: bool = False):
    """Run ``methods`` on ``datasets`` at each anchor fraction and seed; one row per run.

    The grid is cut into tasks, one per (dataset, fraction, seed) and method (the MAD entries that
    share one fit, each matcher and cost of it, form one task), run by joblib on ``jobs`` local
    processes (``backend="loky"``) or on a Dask cluster (``backend="dask"``). Every run is seeded, so
    the table is the same whatever the backend and the number of jobs; its rows are in grid order.
    With ``cache``, each finished run is a JSON file there, and a later call with the same settings (the
    package version, the quick settings, latent dimension, device, dataset and the method's registry
    entry; :func:`_run_settings`) reads it instead of fitting again (an interrupted or extended
    comparison resumes); runs that failed are not cached, so they are tried again.

    Parameters
    ----------
    datasets : names, or dict label -> name or AlignmentProblem (paired views with truth)
    methods : method names (default: every available one of ``COMPARE_METHODS``)
    fractions : anchor fractions (default 0.05, 0.1, 0.25; 0.1, 0.25 with ``quick``)
    seeds : int n (seeds 0 .. n - 1) or a list of seeds (default 3; 1 with ``quick``)
    device : torch device for the Bayesian methods
    quick : small datasets and few settings (minutes in all)
    log : called with one line per run (e.g. ``print``)
    progress : bool
        The Bayesian fits' own progress bars.
    collect : dict, optional
        Filled with (dataset, method, fraction, seed) -> (MethodResult, problem) of the runs that were
        fitted (not those read from the cache).
    jobs : int
        Parallel tasks (joblib's ``n_jobs``: -1 all cores, or all Dask workers).
    backend : {"loky", "dask"}
        joblib's local process pool, or a Dask distributed cluster.
    scheduler : str, optional
        Address of the Dask scheduler (``tcp://host:8786``); default: the Dask client already made in
        this process.
    cache : str or Path, optional
        Folder of finished runs: one ``{dataset}__{method}__{fraction}__{seed}.json`` each.
    progress_bar : bool
        A tqdm bar over the grid's tasks, on a terminal or in a notebook (not when stderr is a file).

    Returns
    -------
    pandas.DataFrame with columns dataset, method, anchor_fraction, seed, n_anchors, n_heldout,
    the :data:`METRICS`, seconds, error (empty when it ran).
    """
    import pandas as pd

    if not isinstance(datasets, Mapping):
        datasets = {name: name for name in datasets}
    methods = [m for m in (methods or COMPARE_METHODS) if methods or METHODS[m].available]
    fractions = tuple(fractions or (QUICK_FRACTIONS if quick else FRACTIONS))
    if seeds is None:
        seeds = 1 if quick else 3
    if np.isscalar(seeds):  # a count (0 or 2.5 is no count of seeds; [0] is seed 0)
        if isinstance(seeds, bool) or not isinstance(seeds, (int, np.integer)) or seeds < 1:
            raise ValueError(f"seeds must be a positive count or a list of seeds, got {seeds!r}")
        seeds = range(int(seeds))
    seeds = list(seeds)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    say = log or (lambda line: None)
    cache = None if cache is None else Path(cache)
    from . import __version__

    # every setting a run's numbers depend on (with the method's registry entry, see _run_settings): a cache
    # written by another version of the package or with other settings is not read
    settings = {"version": __version__, "quick": dict(QUICK_BAYESIAN) if quick else None, "latent_dim": latent_dim,
                "device": device}
    rows: dict[tuple, dict] = {}  # grid position -> row
    tasks = []
    problems = {}
    for d, (label, item) in enumerate(datasets.items()):
        fingerprint = dict(settings, dataset=item if isinstance(item, str) else _problem_digest(item))
        for f, fraction in enumerate(fractions):
            for s, seed in enumerate(seeds):
                for group in _method_groups(methods):
                    todo = []
                    for method in group:
                        position = (d, f, s, methods.index(method))
                        found = _read_cached(cache, label, method, fraction, seed,
                                             _run_settings(fingerprint, label, method, fraction, seed))
                        if found is None:
                            todo.append((position, method))
                        else:
                            rows[position] = found
                            say(_log_line(found) + " (cached)")
                    if todo:
                        if label not in problems:
                            problems[label] = load_dataset(item, quick) if isinstance(item, str) else item
                        tasks.append((label, problems[label], fraction, seed, todo, fingerprint))
    # the quick settings travel with the tasks: a worker process has the module's defaults only
    options = {"latent_dim": latent_dim, "device": device, "quick": dict(QUICK_BAYESIAN) if quick else None,
               "progress": progress,
               "cache": cache, "keep": collect is not None}
    for done in _execute(tasks, options, jobs, backend, scheduler, progress_bar):
        for position, row, found in done:
            rows[position] = row
            say(_log_line(row))
            if found is not None:
                collect[(row["dataset"], row["method"], row["anchor_fraction"], row["seed"])] = found
    frame = pd.DataFrame([rows[key] for key in sorted(rows)])
    for column in ("traceback",):
        if column in frame:
            frame = frame.drop(columns=column)
    return frame


#: joblib backends of :func:`run_comparison`.
BACKENDS = ("loky", "dask")


def _method_groups(methods):
    """The methods in tasks: the MAD entries that share a fit (same ``target``) together, the others alone."""
    groups: dict[str, list[str]] = {}
    for method in methods:
        spec = get_method(method)
        groups.setdefault(f"mad:{spec.target}" if spec.kind == "mad" else method, []).append(method)
    return list(groups.values())


def _run_task(label, base, fraction, seed, todo, fingerprint, options):
    """One task of the grid: split the dataset, run its methods (sharing a MAD fit), cache each row."""
    problem = base.split_anchors(fraction, seed=seed).shuffle_unaligned(seed=seed)
    n_anchor = len(problem.anchors_between(*problem.views.names[:2]))
    fitted: dict[str, object] = {}  # one MAD fit serves each of its matchers and costs
    out = []
    for position, method in todo:
        row = {"dataset": label, "method": method, "anchor_fraction": fraction, "seed": seed,
               "n_anchors": n_anchor, "n_heldout": problem.views.n_samples[problem.views.names[0]] - n_anchor}
        found = None
        try:
            result = _run(method, problem, seed, options["latent_dim"], options["device"], options["quick"],
                          options["progress"], fitted)
            row.update(evaluate_method_result(result, problem), seconds=result.seconds, error="")
            found = (result, problem) if options["keep"] else None
            _write_cached(options["cache"], row, _run_settings(fingerprint, label, method, fraction, seed))
        except Exception as exc:  # recorded, never fatal: the table shows what failed
            row.update({m: float("nan") for m in METRICS}, seconds=float("nan"),
                       error=f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300])
            row["traceback"] = traceback.format_exc(limit=-3)
        out.append((position, row, found))
    return out


def _execute(tasks, options, jobs, backend, scheduler, progress_bar):
    """Run the tasks with joblib; yields each task's rows as it finishes."""
    from joblib import Parallel, delayed, parallel_config
    from tqdm import autonotebook, std
    from tqdm.auto import tqdm

    # redrawn only where someone watches it (a terminal, a notebook), never into a log file
    on_screen = sys.stderr.isatty() or autonotebook.tqdm is not std.tqdm
    bar = tqdm(total=len(tasks), desc="comparison", unit="task", disable=not (progress_bar and tasks and on_screen))
    if backend == "loky" and (jobs == 1 or len(tasks) <= 1):  # in this process: no pickling, no workers
        for task in tasks:
            yield _run_task(*task, options)
            bar.update()
        bar.close()
        return
    # the Bayesian fits (minutes) first, the spectral ones (seconds) fill the gaps: longest first keeps
    # every worker busy until the end (the table is sorted into grid order afterwards)
    slow_first = sorted(tasks, key=lambda task: not any(get_method(m).bayesian for _, m in task[4]))
    calls = (delayed(_run_task)(*task, options) for task in slow_first)
    client = None
    if backend == "dask":
        try:
            import distributed
        except ImportError as exc:
            raise ImportError("backend='dask' needs dask distributed: pip install 'bayesalign[dask]'") from exc
        if scheduler is not None:
            client = distributed.Client(scheduler)
        else:
            try:
                distributed.get_client()
            except ValueError:
                raise ValueError("backend='dask' needs a scheduler address (scheduler='tcp://host:8786') or a "
                                 "dask.distributed Client made in this process") from None
    try:
        with parallel_config(backend=backend, n_jobs=jobs):
            with ctrl_c_held():  # the workers start deaf to a terminal's Ctrl-C; this process takes it after
                outputs = Parallel(return_as="generator_unordered")(calls)
            for done in outputs:
                yield done
                bar.update()
    finally:
        bar.close()
        if client is not None:
            client.close()


def _run(method, problem, seed, latent_dim, device, quick, progress, fitted):
    """One method on one problem; ``quick`` the quick Bayesian settings (None: the methods' defaults)."""
    spec = get_method(method)
    options = quick_options(spec, quick) if quick is not None else {}
    if spec.kind != "mad":
        return run_method(method, problem, seed=seed, latent_dim=latent_dim, device=device,
                          progress=progress, options=options)
    if spec.target not in fitted:
        start = time.perf_counter()
        result = run_method(method, problem, seed=seed, latent_dim=latent_dim, device=device,
                            progress=progress, options=options)
        fitted[spec.target] = (result.model, time.perf_counter() - start)
        return result
    model, fit_seconds = fitted[spec.target]
    start = time.perf_counter()
    result = run_method(method, problem, seed=seed, latent_dim=latent_dim, fitted=model)
    result.seconds = fit_seconds + (time.perf_counter() - start)
    return result


#: Settings of the Bayesian fits under ``--quick``: fewer optimiser iterations (MRD / GP-LVM keywords;
#: MAD forwards them to its MRD).
QUICK_BAYESIAN = {"max_iter": 150, "warmup_iters": 50, "num_inducing": 15}

#: The datasets of ``experiments/compare.py --quick``: one of each family, at their quick sizes.
QUICK_DATASETS = ("mad_toy_linear_shared_private", "swiss_roll", "protein", "mocap", "digits_halves",
                  "mfeat_fou_kar")


def quick_options(spec, settings: dict | None = None) -> dict:
    """Constructor options that make a Bayesian method fast enough for ``--quick`` (``settings``:
    default :data:`QUICK_BAYESIAN`)."""
    if not spec.bayesian:
        return {}
    from .registry import _FORWARDING, _accepted, _named_parameters

    cls = spec.load()
    accepted = _accepted(cls)
    settings = QUICK_BAYESIAN if settings is None else settings
    if set(_FORWARDING) & _named_parameters(cls):  # the model inside takes what the class does not (_build)
        return dict(settings)
    return {k: v for k, v in settings.items() if accepted is None or k in accepted}


def _log_line(row) -> str:
    head = (f"{row['dataset']:>28s} {row['method']:>24s} anchors {row['anchor_fraction']:.2f} "
            f"seed {row['seed']}")
    if row["error"]:
        return f"{head}: FAILED {row['error']}"
    return (f"{head}: accuracy {row['accuracy']:.3f}, Kendall-tau {row['kendall_tau']:.3f}, "
            f"{row['seconds']:.1f} s")


# Demo --------------------------------------------------------------------------------------------
DEMO_METHODS = ("mad", "joint-laplacian", "procrustes")
DEMO_FRACTIONS = (0.25, 0.5)
#: The demo's datasets: (loader, keywords, label). mocap: the MAD paper's motion-capture setting
#: (358 frames of CMU subject 35 walking, the 59 channels split into two views; 50% anchors as its
#: N_init = 175 of 350); digits: its digits setting (100 zeros cut into top and bottom halves).
DEMO_DATASETS = {"mocap": ("mocap", {}, "mocap_cmu35_walk"),
                 "digits": ("digits_halves", {"digit": 0, "n": 100}, "digits_zeros_halves")}


def demo(out_dir="bayesalign-demo", dataset: str = "mocap", seed: int = 0, device=None, log=None):
    """MAD against two spectral baselines on shipped real data, at 25% and 50% anchors.

    Writes the table (CSV, Markdown), accuracy against anchor fraction, a reliability diagram of the
    match probabilities at 50% anchors, and for ``dataset="digits"`` the matched halves (the MAD
    paper's Figure 3). Methods that are not installed are skipped with a note (replaced by other
    spectral ones). Returns (runs frame, written paths).
    """
    from .datasets import load

    if dataset not in DEMO_DATASETS:
        raise ValueError(f"unknown demo dataset {dataset!r}; choose one of {list(DEMO_DATASETS)}")
    say = log or (lambda line: None)
    methods = [m for m in DEMO_METHODS if METHODS[m].available]
    missing = [m for m in DEMO_METHODS if m not in methods]
    if missing:
        say(f"demo: {', '.join(missing)} not available in this installation; skipped")
    spectral = [m for m in COMPARE_METHODS if METHODS[m].kind == "embedding" and METHODS[m].available]
    while sum(METHODS[m].kind == "embedding" for m in methods) < 2 and spectral:
        extra = spectral.pop(0)
        if extra not in methods:
            methods.append(extra)
    loader, kwargs, label = DEMO_DATASETS[dataset]
    problem = load(loader, **kwargs).replace(name=label)
    say(f"demo: {label} {problem.views!r}; methods {', '.join(methods)}")
    runs: dict = {}
    frame = run_comparison({label: problem}, methods=methods, fractions=DEMO_FRACTIONS, seeds=[seed],
                           device=device, log=say, progress=True, collect=runs)
    paths = write_results(frame, out_dir, stem="demo") if len(frame) else []
    last = DEMO_FRACTIONS[-1]
    shown = {method: found for (_, method, fraction, _), found in runs.items() if fraction == last}
    if shown:
        from .plot import plot_reliability

        # every run at one fraction and seed: one problem; each method's first pair of views
        problem = next(iter(shown.values()))[1]
        first = {method: next(iter(result.alignments.values())) for method, (result, _) in shown.items()}
        paths.append(Path(out_dir) / "demo_reliability.png")
        plot_reliability(first, problem, path=paths[-1])
        if dataset == "digits":
            paths.append(plot_matched_halves(shown, Path(out_dir) / "demo_matched_digits.png"))
    return frame, paths
