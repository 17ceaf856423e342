"""The ``bayesalign`` command: align your own files, compare methods, run the papers' experiments, a demo.

Every subcommand is a thin layer over the Python API (``bayesalign.io`` reads and writes the files,
``bayesalign.registry`` runs a method by name, ``bayesalign.compare`` runs the comparison suite).
Errors a person can act on (a missing file, a malformed anchors file, an unknown method, an output
path that is an input, a directory or unwritable, an unavailable ``--device``, ...) are printed as one
line on stderr with exit status 2; ``--debug`` shows the traceback instead. Outputs and the device are
checked before anything is fitted, and the outputs are written all or none at the end, each through a
temporary file: Ctrl-C stops the command at once with exit status 130 and SIGTERM with 143, leaving
every output as it was.

Examples
--------
>>> args = build_parser().parse_args(["align", "a.csv", "b.csv", "--anchors", "pairs.csv", "--out", "m.csv"])
>>> args.views, args.method
(['a.csv', 'b.csv'], 'joint-laplacian')
>>> main(["align", "a.csv", "b.csv", "--method", "magic", "--anchors", "p.csv", "--out", "m.csv"])
2
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import os
import signal
import sys
import tempfile
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path

# the standard library only, here: numpy and the package's parts load inside main(), where Ctrl-C is handled
EXIT_USAGE = 2
EXIT_INTERNAL = 1
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C

ANCHORS_HELP = """\
anchors file (.csv, .tsv, .txt): known pairs. A cell is a row name (when the view file has row
names) or a 0-based row index. Wide layout: one column per view, in the order of the views (or a
header line of view names); each line is one thing seen in several views (an empty cell, - or NA:
not in that view), giving a pair between every two views it names. Two views: the plain two-column
file "row_a,row_b". Long layout: a header view_a,row_a,view_b,row_b and one pair per line between
any two views (the --out file of this command has this layout, so confident matches can be fed
back as anchors)."""


from .cli_checks import (  # noqa: E402  (the argument checks live beside: this file's job is the commands)
    CommandError,
    _check_device,
    _check_option_types,
    _check_outputs,
    _check_writable_folder,
    _existing_folder,
    _one_line,
    _parse_options,
    _seed,
    _view_names,
    add_grid_options,
    check_grid_options,
)


def _say(message: str = "") -> None:
    print(message, file=sys.stderr, flush=True)


# align ---------------------------------------------------------------------------------------
def _add_align(sub) -> None:
    from .registry import MAD_COSTS, MAD_MATCHERS

    p = sub.add_parser(
        "align", help="find correspondences between the rows of 2+ data files",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Find which rows of VIEW_B (, VIEW_C, ...) correspond to which rows of VIEW_A, given some
            known pairs (anchors). Views: .csv/.tsv/.txt (optionally .gz; a header line and a first
            column of row names are detected), .npy, .npz (one array, or FILE.npz:KEY).

            Output (--out, CSV): one line per pair, anchors included, with columns
              view_a,row_a,view_b,row_b,index_a,index_b,cost,probability,anchor
            row_* are row names (or indices), index_* 0-based row indices; cost is the method's
            (lower is better); probability the chance that the pair is right (anchors: 1, cost 0).
            Spectral methods: Hungarian matching on latent distances, probabilities from Sinkhorn
            marginals. With 3+ views every pair of views is matched.
            A summary (matched, unmatched, mean confidence) goes to stderr."""),
        epilog=textwrap.dedent("""\
            examples:
              bayesalign align en.csv it.csv --anchors pairs.csv --method mad --out matches.csv
              bayesalign align a.npy b.npy c.npy --anchors wide.csv --method joint-laplacian \\
                  --latent-dim 3 --out matches.csv --embedding latent.npz
            the methods, with their papers: bayesalign align --list-methods"""))
    p.add_argument("views", nargs="*", metavar="VIEW", help="data files, one per view (at least two)")
    p.add_argument("--anchors", metavar="PAIRS", help=ANCHORS_HELP)
    p.add_argument("--method", default="joint-laplacian", help="alignment method (default: joint-laplacian)")
    p.add_argument("--out", metavar="MATCHES.csv", help="where to write the matches (CSV)")
    p.add_argument("--embedding", metavar="OUT.npz", help="also write the latent coordinates (.npz: "
                   "means_<view>, variances_<view>, row_names_<view>, shared_dims)")
    p.add_argument("--plots", metavar="DIR", help="also write the figures of the fit to DIR (PNG): latent scatter "
                   "coloured by match confidence, and for the Bayesian methods ARD relevance, bound trace and "
                   "MAD's cost heatmap")
    p.add_argument("--names", nargs="+", metavar="NAME", help="view names (default: the file names)")
    p.add_argument("--row-names", action="store_true", help="the first column of every text view holds "
                   "row names (default: detected)")
    p.add_argument("--standardise", "--standardize", action="store_true",
                   help="centre every column of every view and divide it by its standard deviation before "
                   "fitting. Off by default: views are used in their own units (MRD / MAD only centre them), "
                   "so a column with a large spread weighs more in distances and kernels. Turn it on when "
                   "the columns of a view are in unrelated units or scales; leave it off when the units "
                   "mean something shared (pixel intensities, counts)")
    p.add_argument("--seed", type=_seed, default=0, help="random seed, a non-negative integer (default 0)")
    p.add_argument("--device", default=None, help="torch device for Bayesian methods, e.g. cpu, cuda")
    p.add_argument("--latent-dim", type=int, default=None, help="latent dimension (default: the method's)")
    p.add_argument("--matcher", choices=MAD_MATCHERS, default=None, help="MAD's matcher (default hungarian)")
    p.add_argument("--cost", choices=MAD_COSTS, default=None, help="MAD's cost (default: its own)")
    p.add_argument("--cost-limit", type=float, default=None,
                   help="leave pairs costlier than this unmatched (rectangular matching)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="options",
                   help="a further option of the method's class, e.g. --set max_iter=500 "
                   "--set num_inducing=30 (repeatable; values are Python literals or strings)")
    p.add_argument("--list-methods", action="store_true", help="list the methods and exit")
    p.set_defaults(run=cmd_align)


def _list_methods() -> None:
    from .registry import METHODS

    for name, spec in METHODS.items():
        mark = "" if spec.available else "  [not installed]"
        print(f"{name:28s} {spec.summary} ({spec.paper}){mark}")


def cmd_align(args) -> int:
    from .data import AlignmentProblem, Views
    from .io import read_anchors, read_view, write_outputs
    from .registry import get_method, run_method

    if args.list_methods:
        _list_methods()
        return 0
    if len(args.views) < 2:
        raise CommandError("align needs at least two view files (VIEW_A VIEW_B ...)")
    if not args.out:
        raise CommandError("align needs --out MATCHES.csv")
    spec = get_method(args.method)  # an unknown name fails here, before any file is read
    if args.anchors is None and args.method != "local-patterns":
        raise CommandError("align needs --anchors PAIRS (or --method local-patterns, which needs none)")
    if spec.kind != "mad" and (args.matcher or args.cost):
        raise CommandError(f"--matcher and --cost are MAD's; {args.method} matches by the Hungarian "
                           "algorithm on latent distances")
    if args.latent_dim is not None and args.latent_dim < 1:
        raise CommandError(f"--latent-dim must be at least 1, got {args.latent_dim}")
    if args.method == "mad-ensemble" and args.embedding:  # before a fit of minutes, not after
        raise CommandError(f"{args.method} gives no latent coordinates to write to {args.embedding} (its members "
                           "each have their own latent space)")
    options = _parse_options(args.options)
    names = _view_names(args.views, args.names)
    # every output and the device are checked before anything is read or fitted
    inputs = {f"view file {path}": path for path in args.views}
    if args.anchors:
        inputs[f"anchors file {args.anchors}"] = args.anchors
    _check_outputs({"--out": args.out, "--embedding": args.embedding}, inputs)
    if args.plots:
        _check_writable_folder("--plots", args.plots, Path(args.plots))
    _check_device(args.device)
    files = [read_view(path, name, True if args.row_names else None) for path, name in zip(args.views, names)]
    anchors = read_anchors(args.anchors, files) if args.anchors else []
    if not spec.available:  # imports the method's module: after the cheap checks of the files
        raise CommandError(f"method {args.method!r} is not available in this installation")
    _check_option_types(spec.load(), options)
    for f, path in zip(files, args.views):
        if f.n_samples < 2:
            raise CommandError(f"view file {path}: {f.n_samples} row; aligning needs at least 2 rows in every view")
    views = Views({f.name: f.data for f in files})
    problem = AlignmentProblem(views.standardised() if args.standardise else views, anchors=anchors)
    sizes = " + ".join(f"{f.n_samples}" for f in files)
    _say(f"bayesalign: {args.method} on {len(files)} views ({sizes} rows), "
         f"{sum(len(c) for c in anchors)} anchor pairs")
    result = run_method(args.method, problem, latent_dim=args.latent_dim, seed=args.seed, device=args.device,
                        matcher=args.matcher, cost=args.cost, cost_limit=args.cost_limit, progress=True,
                        options=options)
    anchor_list = [problem.anchors_between(a, b, implied=True) for a, b in result.alignments]
    if args.embedding and result.embedding is None:
        raise CommandError(f"{args.method} gives no latent coordinates to write to {args.embedding}")
    with contextlib.ExitStack() as stack:
        if args.plots:  # figures first, in a temporary folder: one that fails leaves every output as it was
            from .plot import write_figures

            staging = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix=".bayesalign-plots.", dir=_existing_folder(Path(args.plots)))))
            figures = write_figures(result, staging, problem=problem)
        # all outputs or none: each is complete in its temporary file before any replaces its path
        _check_not_interrupted()  # a Ctrl-C that a library swallowed during the fit still means: write nothing
        write_outputs(args.out, list(result.alignments.values()), anchor_list, files,
                      embedding_path=args.embedding, embedding=result.embedding)
        if args.plots:
            Path(args.plots).mkdir(parents=True, exist_ok=True)
            figures = [Path(args.plots) / figure.name for figure in figures]
            for figure in figures:
                os.replace(staging / figure.name, figure)
    for (a, b), al in result.alignments.items():
        has_probs = al.probabilities is not None and len(al) > 0
        calibration = al.info.get("calibration", {})
        note = " (uncalibrated)" if calibration and not calibration["calibrated"] else \
            " (near chance: no signal between the views)" if calibration and not calibration["signal"] else ""
        conf = f", mean confidence {float(al.probabilities.mean()):.3f}{note}" if has_probs else ""
        _say(f"{a} <-> {b}: {len(al)} matched, {al.unmatched_a.size} of {a} and {al.unmatched_b.size} of {b} "
             f"left unmatched, {len(problem.anchors_between(a, b, implied=True))} anchors kept{conf}")
    _say(f"wrote {args.out}" + (f" and {args.embedding}" if args.embedding else "")
         + f" ({result.seconds:.1f} s)")
    if args.plots:
        _say(f"wrote {len(figures)} figures to {args.plots}: " + ", ".join(p.name for p in figures))
    return 0


# compare -------------------------------------------------------------------------------------
def _add_compare(sub) -> None:
    p = sub.add_parser(
        "compare", help="compare methods on a shipped dataset or on paired files",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=textwrap.dedent("""\
            Run alignment methods on a dataset at several anchor fractions and seeds and print the
            table (accuracy, Kendall-tau distance, top-1/top-10, FOSCTTM, calibration, seconds).
            Shipped datasets: see --list-datasets. Your own data: give 2+ view files whose rows are
            paired (by row name when every file has row names, else row i of each file is the same
            thing; the pairing is the truth the metrics use).
            Writes CSV (every run), a Markdown summary and one figure per dataset to --out."""))
    p.add_argument("files", nargs="*", metavar="VIEW", help="paired view files (instead of --dataset)")
    p.add_argument("--dataset", nargs="+", metavar="NAME", help="shipped dataset(s)")
    p.add_argument("--methods", nargs="+", metavar="METHOD", help="methods (default: all available)")
    p.add_argument("--anchors", nargs="+", type=float, default=None, metavar="FRACTION",
                   help="anchor fractions (default 0.05 0.1 0.25)")
    p.add_argument("--seeds", type=int, default=None, help="number of seeds (default 3; 1 with --quick)")
    p.add_argument("--latent-dim", type=int, default=None, help="latent dimension (default: per method)")
    p.add_argument("--quick", action="store_true", help="small subsets and few settings: minutes")
    p.add_argument("--out", default="bayesalign-compare", help="output folder (default ./bayesalign-compare)")
    add_grid_options(p)
    p.add_argument("--list-datasets", action="store_true", help="list the shipped datasets and exit")
    p.set_defaults(run=cmd_compare)


def cmd_compare(args) -> int:
    from . import compare
    from .data import AlignmentProblem, Views
    from .io import paired_rows, read_view

    if args.list_datasets:
        for name, doc in compare.dataset_summaries().items():
            print(f"{name:34s} {doc}")
        return 0
    _check_writable_folder("--out", args.out, Path(args.out))  # before a run of minutes
    check_grid_options(args)
    if bool(args.files) == bool(args.dataset):
        raise CommandError("compare needs either --dataset NAME or two or more paired view files")
    if args.files:
        if len(args.files) < 2:
            raise CommandError("compare needs at least two view files")
        files = [read_view(path, name) for path, name in zip(args.files, _view_names(args.files, None))]
        arrays, how = paired_rows(files)
        if how == "name":
            _say(f"rows paired by their names (the order of {files[0].path})")
        problems = {"files": AlignmentProblem.paired(Views({f.name: x for f, x in zip(files, arrays)}),
                                                     name="files")}
    else:
        problems = {name: name for name in args.dataset}
        for name in args.dataset:
            compare.check_dataset(name)
    if args.methods:
        for method in args.methods:
            compare.check_method(method)
    frame = compare.run_comparison(problems, methods=args.methods, fractions=args.anchors,
                                   seeds=args.seeds, quick=args.quick, latent_dim=args.latent_dim, log=_say,
                                   jobs=args.jobs, backend=args.backend, scheduler=args.scheduler,
                                   cache=args.cache, progress_bar=True)
    paths = compare.write_results(frame, args.out)
    print(compare.markdown_summary(frame))
    _say("wrote " + ", ".join(str(p) for p in paths))
    return 0


# experiment ----------------------------------------------------------------------------------
def experiments_dir() -> Path | None:
    """The repository's ``experiments/`` folder beside the package (editable installs), if present."""
    folder = Path(__file__).resolve().parent.parent / "experiments"
    return folder if folder.is_dir() else None


def list_experiments(folder: Path | None = None) -> dict[str, str]:
    """Experiment name -> the first line of its module docstring (read without importing it)."""
    folder = experiments_dir() if folder is None else folder
    out = {}
    for path in sorted(folder.glob("*.py")) if folder else []:
        if path.name.startswith("_"):
            continue
        try:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        except SyntaxError:
            doc = "(does not parse)"
        out[path.stem] = doc.strip().splitlines()[0] if doc.strip() else ""
    return out


def _add_experiment(sub) -> None:
    p = sub.add_parser("experiment", help="run one of the papers' experiments (experiments/NAME.py)",
                       description="Run an experiment script of the repository's experiments/ folder; "
                       "arguments after NAME go to the script (try NAME --help).")
    p.add_argument("name", nargs="?", metavar="NAME")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the experiment")
    p.add_argument("--list", action="store_true", help="list the experiments")
    p.set_defaults(run=cmd_experiment)


def cmd_experiment(args) -> int:
    folder = experiments_dir()
    if folder is None:
        raise CommandError("the experiments/ folder is not available: the experiments ship with the source "
                           "repository; run them from a clone installed with pip install -e .")
    found = list_experiments(folder)
    if args.list or not args.name:
        for name, line in found.items():
            print(f"{name:24s} {line}")
        return 0
    name = args.name.removesuffix(".py").replace("-", "_")
    if name not in found:
        raise CommandError(f"unknown experiment {args.name!r}; experiments: {', '.join(found)}")
    path = folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"bayesalign_experiment_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "main"):
        raise CommandError(f"{path} has no main(argv) function")
    try:
        status = module.main(list(args.args))
    except SystemExit as exc:  # the script's own argparse (--help, a usage error)
        status = exc.code
    return status if isinstance(status, int) else (0 if status is None else EXIT_USAGE)


# demo ----------------------------------------------------------------------------------------
def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="a few-minute MAD run on shipped real data against spectral baselines",
                       description="MAD against two spectral baselines (joint Laplacian, Procrustes) on "
                       "shipped real data at 25% and 50% anchors: CMU motion capture (a walk, its 59 "
                       "channels split into two views; the MAD paper's setting) or scikit-learn's digit "
                       "halves (top vs bottom half of 100 zeros). Prints the table; writes it, accuracy "
                       "against anchors and a reliability diagram of the match probabilities to --out.")
    p.add_argument("--dataset", choices=("mocap", "digits"), default="mocap", help="default mocap")
    p.add_argument("--out", default="bayesalign-demo", help="output folder (default ./bayesalign-demo)")
    p.add_argument("--seed", type=_seed, default=0, help="random seed, a non-negative integer (default 0)")
    p.add_argument("--device", default=None, help="torch device for MAD, e.g. cuda")
    p.set_defaults(run=cmd_demo)


def cmd_demo(args) -> int:
    from . import compare

    _check_device(args.device)
    _check_writable_folder("--out", args.out, Path(args.out))  # before a run of minutes
    frame, paths = compare.demo(args.out, dataset=args.dataset, seed=args.seed, device=args.device, log=_say)
    print(compare.markdown_summary(frame))
    _say("wrote " + ", ".join(str(p) for p in paths))
    return 0


# entry point ---------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesalign", description="Bayesian alignment: find correspondences between datasets.",
        epilog="Run 'bayesalign COMMAND --help' for a command's options.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"bayesalign {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_align(sub)
    _add_compare(sub)
    _add_experiment(sub)
    _add_demo(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 an error the user can act on, 130 Ctrl-C)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while the modules are imported or the parser is built
        _say("bayesalign: interrupted; no output written")
        return EXIT_INTERRUPTED


def _main(argv: Sequence[str] | None) -> int:
    from .io import InputError
    from .registry import UnknownMethodError

    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug is accepted anywhere on the line, not only before the command
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: argparse printed them
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    previous = _terminate_cleanly()
    previous_sigint = _record_interrupts()
    shown = warnings.showwarning
    if not debug:  # a warning is one line naming the command, as an error is (--debug: Python's, with the source)
        warnings.showwarning = _warning_line(args.command)
    try:
        return args.run(args)
    except KeyboardInterrupt:  # Ctrl-C: stop at once; every output is as it was (written only at the end)
        _say(f"bayesalign {args.command}: interrupted; no output written")
        return EXIT_INTERRUPTED
    except (CommandError, InputError, UnknownMethodError, OSError) as exc:  # OSError: a full disk, a permission
        if debug:
            raise
        _say(f"bayesalign {args.command}: error: {_one_line(exc)}")
        return EXIT_USAGE
    except (ValueError, TypeError, KeyError) as exc:  # raised by a method on bad input
        if debug:
            raise
        _say(f"bayesalign {args.command}: error: {_one_line(exc)} (--debug shows where)")
        return EXIT_USAGE
    except Exception as exc:
        if debug:
            raise
        _say(f"bayesalign {args.command}: internal error: {type(exc).__name__}: {_one_line(exc)} "
             "(run with --debug for the traceback)")
        return EXIT_INTERNAL
    finally:
        warnings.showwarning = shown
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)


def _terminate_cleanly():
    """Turn SIGTERM into ``SystemExit(143)`` while the command runs, so that ``finally`` blocks run
    (a writer removes its temporary file) instead of the process vanishing mid-write. Returns the
    previous handler (None where signals cannot be set: not the main thread)."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread of the main interpreter
        return None


_INTERRUPTS: list[int] = []  # SIGINTs received while the current command runs


def _record_interrupts():
    """Ctrl-C raises KeyboardInterrupt as usual and is also recorded, so that one a library swallows (an
    interrupt that lands in code with a bare ``except``) still stops the command before it writes
    (:func:`_check_not_interrupted`). Returns the previous handler (None where signals cannot be set)."""
    _INTERRUPTS.clear()

    def handler(signum, frame):
        _INTERRUPTS.append(signum)
        raise KeyboardInterrupt

    try:
        return signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread of the main interpreter
        return None


def _check_not_interrupted() -> None:
    """Raise KeyboardInterrupt if Ctrl-C arrived during the command, whatever became of its exception."""
    if _INTERRUPTS:
        raise KeyboardInterrupt


def _warning_line(command: str):
    """``warnings.showwarning`` for the command line: "bayesalign <command>: warning: <message> (<category>)" on one
    line of stderr, without the source line of the library that raised it."""
    def show(message, category, filename, lineno, file=None, line=None):
        _say(f"bayesalign {command}: warning: {_one_line(message)} ({category.__name__})")

    return show


if __name__ == "__main__":  # pragma: no cover
    try:
        status = main()
    except KeyboardInterrupt:  # Ctrl-C as this module loaded: raised on entering main(), before its own handling
        _say("bayesalign: interrupted; no output written")
        status = EXIT_INTERRUPTED
    sys.exit(status)
