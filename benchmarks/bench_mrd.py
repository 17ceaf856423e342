"""MRD speed: bayesalign against GPy, side by side in one run, single-threaded for both.

Reference workload: 2 views, N=100, D=20 each, Q=5, M=20, RBF-ARD kernels. Both
libraries get the same centred data, the same noise initialisation (mean column variance / 100 per
view) and 1000 L-BFGS evaluations in all (GPy: scipy's L-BFGS-B; bayesalign: its own, in torch); each
uses its own default initialisation of q(X) (PCA of the concatenated views) and inducing inputs. GPy holds
the noise fixed for the first 300 evaluations (the schedule of its MRD examples); bayesalign uses its
defaults (a 100-evaluation warm-up, 30 L-BFGS correction pairs; ``--our-warmup 300`` gives it GPy's schedule,
``--precondition-after N`` when L-BFGS switches to preconditioned latent means, -1 never;
``--init cca`` starts q(X) at the views' shared and private directions). The script
prints each library's final bound and seconds, our time to reach GPy's final bound, and the time of
one bound+gradient evaluation of each. One short untimed fit of each library comes first, so that
one-time costs (lazy imports) are not counted as fitting time.

Larger workload: N=2000, D=100 per view, Q=10, M=100 (ours; ``--gpy-large`` also times one GPy
evaluation): full fit time, seconds per evaluation and the peak resident memory.

Data (``make_views``, deterministic): t = linspace(0, 4 pi, N); three latent signals
sin(t), cos(2.5 t), sin(1.7 t + 1), each plus N(0, 0.1^2) noise; view "a" is a random linear map
(standard normal weights) of signals (1, 2) to D dimensions, view "b" of signals (1, 3); both plus
N(0, 0.1^2) noise; numpy ``default_rng(seed)`` draws everything in that order. So the shared
signal is sin(t) and each view has one private signal (the toy data of the MAD paper, section 4).

Real data (``--real mfeat``): MRD from "pca" and from "cca" on both views of a shipped dataset.

Partially observed workload (``--partial``, MAD's all-rows layout): the views of the larger workload
(N=2000, D=100) with 10% anchors: 200 random rows are one entity seen by both views, every other
row of each view an entity of its own (3,800 entities); Q=10, M=50. Prints the seconds of one
bound+gradient of the partially observed model beside the paired model of the same rows
(interleaved), then a full fit: seconds, evaluations, and how well the latent dimension most
relevant to both views tracks the shared signal sin(t) on each view's unaligned rows.

Run:  python benchmarks/bench_mrd.py [--seeds 0 1 2 3 4] [--large] [--large-dtypes float64,float32] [--gpy-large]
      [--threads-large 2] [--memory] [--init cca] [--real mfeat] [--partial [--partial-evals 1000]]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before numpy / torch are imported: single-threaded BLAS for both libraries

import argparse  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bayesalign.gp import MRD  # noqa: E402


def make_views(N: int = 100, D: int = 20, seed: int = 0) -> dict[str, np.ndarray]:
    """One shared and one private latent signal per view, linearly mapped to D dims (see module doc)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 4 * np.pi, N)
    signals = np.c_[np.sin(t), np.cos(2.5 * t), np.sin(1.7 * t + 1)] + 0.1 * rng.normal(size=(N, 3))
    Ya = signals[:, [0, 1]] @ rng.normal(size=(2, D)) + 0.1 * rng.normal(size=(N, D))
    Yb = signals[:, [0, 2]] @ rng.normal(size=(2, D)) + 0.1 * rng.normal(size=(N, D))
    return {"a": Ya - Ya.mean(0), "b": Yb - Yb.mean(0)}


def _noise_init(Y, snr=100.0):
    return float(np.square(Y).sum() / Y.size) / snr


def fit_gpy(views, Q, M, max_evals, warmup, seed=0):
    """GPy's MRD with the same schedule; returns (bound, seconds, trace [(seconds, bound)], per-eval s)."""
    import GPy

    np.random.seed(seed)
    Ylist = list(views.values())
    start = time.perf_counter()
    model = GPy.models.MRD(Ylist, input_dim=Q, num_inducing=M)
    for b, Y in zip(model.bgplvms, Ylist):
        b.likelihood.variance = _noise_init(Y)
        b.likelihood.variance.fix()
    trace = []
    objective = model._objective_grads

    def recorded(x):
        f, g = objective(x)
        trace.append((time.perf_counter() - start, -float(f)))
        return f, g

    model._objective_grads = recorded
    model.optimize("lbfgsb", max_iters=warmup)
    for b in model.bgplvms:
        b.likelihood.variance.unfix()
    model.optimize("lbfgsb", max_iters=max_evals - warmup)
    seconds = time.perf_counter() - start
    model._objective_grads = objective
    x = model.optimizer_array.copy()
    bound = -float(np.asarray(model._objective_grads(x)[0]).reshape(-1)[0])
    return bound, seconds, trace, gpy_evaluator(model)


def gpy_evaluator(model):
    """One GPy bound+gradient evaluation at (a hair off) the current parameters."""
    x = model.optimizer_array.copy()
    step = [0]

    def evaluate():
        step[0] += 1
        model._objective_grads(x + 1e-12 * step[0])

    return evaluate


def our_evaluator(model):
    """One bayesalign bound+gradient evaluation, as the fit's closure does it."""
    return model.module_.evaluate_with_gradient


def time_evaluations(evaluators: dict, reps: int = 30, rounds: int = 5) -> dict:
    """Per-evaluation (wall, CPU) seconds of each evaluator, interleaved round by round so that both
    libraries see the same machine load; the median round of each is reported. CPU time
    (``time.process_time``) is less sensitive than wall time to other processes on a shared machine."""
    samples = {name: [] for name in evaluators}
    for f in evaluators.values():
        f()
    for _ in range(rounds):
        for name, f in evaluators.items():
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(reps):
                f()
            samples[name].append(((time.perf_counter() - w0) / reps, (time.process_time() - c0) / reps))
    return {name: tuple(float(np.median([s[i] for s in runs])) for i in range(2)) for name, runs in samples.items()}


def per_eval_seconds(model, reps=30):
    return time_evaluations({"ours": our_evaluator(model)}, reps=reps, rounds=1)["ours"][0]


def fit_ours(views, Q, M, max_evals, warmup, seed=0, dtype="float64", precondition_after=200, init="pca"):
    start = time.perf_counter()
    model = MRD(latent_dim=Q, num_inducing=M, max_iter=max_evals, warmup_iters=warmup, seed=seed,
                progress=False, dtype=dtype, init=init,
                precondition_after=None if precondition_after < 0 else precondition_after).fit(views)
    seconds = time.perf_counter() - start
    setup = seconds - (model.history_seconds_[-1] if model.n_iter_ else 0.0)
    return model, seconds, setup


def evaluations_to(history: np.ndarray, fraction: float = 0.999) -> int:
    """First evaluation whose bound has made ``fraction`` of the fit's total improvement."""
    start, best = history[0], history.max()
    return int(np.flatnonzero(history >= start + fraction * (best - start))[0]) + 1


def reference_seed(views, Q, M, evals, warmup, our_warmup, seed, have_gpy, precondition_after=200, init="pca"):
    """One side-by-side run; returns a dict of what was measured (and the fitted models)."""
    out = {}
    if have_gpy:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out["gpy_bound"], out["gpy_seconds"], trace, out["gpy_evaluate"] = fit_gpy(views, Q, M, evals, warmup,
                                                                                       seed=seed)
        out["gpy_evals"] = len(trace)
    cpu0 = time.process_time()
    model, seconds, setup = fit_ours(views, Q, M, evals, our_warmup, seed=seed,
                                     precondition_after=precondition_after, init=init)
    out.update(model=model, seconds=seconds, cpu=time.process_time() - cpu0, bound=model.elbo())
    if have_gpy:
        reached = np.flatnonzero(model.history_ >= out["gpy_bound"] - 1e-9)
        out["reached_at"] = int(reached[0]) + 1 if reached.size else None
        out["reached_seconds"] = setup + model.history_seconds_[reached[0]] if reached.size else None
        g_reached = [t for t, b in trace if b >= out["bound"] - 1e-9]
        out["gpy_reaches_ours"] = g_reached[0] if g_reached else None
    return out


def reference(args):
    torch.set_num_threads(1)
    Q, M, evals, warmup = 5, 20, args.evals, args.warmup
    print(f"reference workload: 2 views, N=100, D=20, Q={Q}, M={M}, RBF-ARD, {evals} L-BFGS evaluations "
          f"(GPy: {warmup} with the noise fixed, bayesalign: {args.our_warmup}; "
          f"precondition_after={args.precondition_after}, init={args.init!r}), "
          f"single-threaded; data and initialisation seeds {args.seeds}")
    have_gpy = True
    try:
        import GPy  # noqa: F401
    except ImportError:
        have_gpy = False
        print("GPy is not installed: only our numbers")
    # one short untimed fit of each library first: their one-time costs (lazy imports: torch loads sympy
    # the first time gpytorch builds a kernel, about a second here) are not part of a fit's speed
    warm = make_views(100, 20, seed=args.seeds[0])
    if have_gpy:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit_gpy(warm, Q, M, 20, 10)
    fit_ours(warm, Q, M, 20, 10)
    ratios = []
    first = None
    for seed in args.seeds:
        r = reference_seed(make_views(100, 20, seed=seed), Q, M, evals, warmup, args.our_warmup, seed, have_gpy,
                           args.precondition_after, args.init)
        first = first or r
        line = (f"  seed {seed}: bayesalign bound {r['bound']:9.3f} in {r['seconds']:5.2f} s "
                f"({r['model'].n_iter_} evals)")
        if have_gpy:
            line += f" | GPy bound {r['gpy_bound']:9.3f} in {r['gpy_seconds']:5.2f} s ({r['gpy_evals']} evals)"
            if r["reached_at"] is not None:
                ratio = r["gpy_seconds"] / r["reached_seconds"]
                ratios.append(ratio)
                line += (f" | we reach GPy's final bound at eval {r['reached_at']}, {r['reached_seconds']:.2f} s: "
                         f"{ratio:.1f}x")
            else:
                ratios.append(0.0)
                line += " | we do not reach GPy's final bound"
        print(line, flush=True)
    if have_gpy and ratios:
        print(f"  time to GPy's final bound, GPy seconds / ours: median {np.median(ratios):.1f}x, "
              f"min {min(ratios):.1f}x, max {max(ratios):.1f}x over {len(ratios)} seeds (0 = not reached)")
    evaluators = {"bayesalign": our_evaluator(first["model"])}
    if have_gpy:
        evaluators["GPy"] = first["gpy_evaluate"]
    timing = time_evaluations(evaluators)
    for name, (wall, cpu) in timing.items():
        print(f"  {name:10s} one bound+gradient: {1e3 * wall:6.2f} ms wall, {1e3 * cpu:6.2f} ms CPU (interleaved)")
    if have_gpy:
        (o_wall, o_cpu), (g_wall, g_cpu) = timing["bayesalign"], timing["GPy"]
        print(f"  per evaluation: bayesalign is {g_wall / o_wall:.1f}x faster (wall), {g_cpu / o_cpu:.1f}x (CPU); "
              f"a whole fit of {evals} evaluations: {first['seconds'] / first['model'].n_iter_ * 1e3:.2f} ms "
              f"per step for bayesalign (seed {args.seeds[0]})")


def large(args):
    torch.set_num_threads(args.threads_large)
    N, D, Q, M = 2000, 100, 10, 100
    views = make_views(N, D, seed=args.seed)
    warmup = min(args.our_warmup, args.large_evals // 2)
    print(f"larger workload: 2 views, N={N}, D={D}, Q={Q}, M={M}, {args.large_evals} evaluations "
          f"({warmup} with the noise fixed), torch threads={args.threads_large}, "
          f"precondition_after={args.precondition_after}, init={args.init!r}")
    for dtype in args.large_dtypes.split(","):
        cpu0 = time.process_time()
        try:
            model, seconds, setup = fit_ours(views, Q, M, args.large_evals, warmup, seed=args.seed, dtype=dtype,
                                             precondition_after=args.precondition_after, init=args.init)
        except Exception as exc:  # noqa: BLE001 -- report and go on with the next dtype
            print(f"  bayesalign {dtype}: failed: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        cpu_fit = time.process_time() - cpu0
        o_eval = per_eval_seconds(model, reps=3)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  bayesalign {dtype}: bound {model.elbo():12.3f}   {seconds:7.2f} s ({cpu_fit:.1f} s CPU)   "
              f"{model.n_iter_} evaluations (converged: {model.converged_}; 99.9% of the improvement after "
              f"{evaluations_to(model.history_)})   {o_eval:6.3f} s per bound+gradient   peak RSS {rss:.0f} MB")
        print(f"    relevance a {np.round(model.relevance_['a'] / model.relevance_['a'].max(), 3)}")
        print(f"    relevance b {np.round(model.relevance_['b'] / model.relevance_['b'].max(), 3)}")
    if args.gpy_large:
        import GPy

        np.random.seed(args.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gm = GPy.models.MRD(list(views.values()), input_dim=Q, num_inducing=M)
            x = gm.optimizer_array.copy()
            gm._objective_grads(x)
            t0 = time.perf_counter()
            for i in range(3):
                gm._objective_grads(x + 1e-9 * i)
        print(f"  GPy {(time.perf_counter() - t0) / 3:6.3f} s per bound+gradient")


_MEMORY_PROBE = """
import resource, sys
sys.path.insert(0, {here!r})
from bench_mrd import make_views
from bayesalign.gp import MRD
model = MRD(latent_dim=10, num_inducing=100, progress=False, seed=0, max_iter=0).fit(make_views({N}, 100))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
bound = model.module_()
(-bound).backward()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before)
"""


def real(args):
    """MRD from each initialisation on a shipped paired dataset (both views, every row): bound, evaluations, time."""
    from bayesalign import datasets

    torch.set_num_threads(args.threads_large)
    problem = datasets.load(args.real)
    views = {name: problem.views[name] for name in problem.views.names}
    shapes = ", ".join(f"{name} {Y.shape[0]}x{Y.shape[1]}" for name, Y in views.items())
    print(f"{args.real} ({shapes}): MRD latent_dim=5, num_inducing=20, {args.evals} evaluations, defaults otherwise, "
          f"torch threads={args.threads_large}")
    for seed in args.seeds:
        for init in ("pca", "cca"):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # constant columns dropped
                model = MRD(latent_dim=5, num_inducing=20, max_iter=args.evals, init=init, seed=seed,
                            progress=False).fit(views)
            print(f"  seed {seed} init {init}: bound {model.elbo():11.2f}   {model.n_iter_} evaluations "
                  f"(converged: {model.converged_})   {time.perf_counter() - start:6.1f} s   "
                  f"shared dims {model.shared_dims().tolist()}", flush=True)


def partial(args):
    """2 views x 2000 rows, 10% anchors, every other row its own entity: per-evaluation cost against the
    paired model of the same rows, then a full fit."""
    torch.set_num_threads(args.threads_large)
    N, D, Q, M = 2000, 100, 10, 50
    views = make_views(N, D, seed=args.seed)
    t = np.linspace(0, 4 * np.pi, N)
    rng = np.random.default_rng(args.seed)
    anchors = rng.choice(N, size=N // 10, replace=False)
    entity_b = np.arange(N, 2 * N)
    entity_b[anchors] = anchors  # an anchor is one entity; every other row of b is its own
    unaligned = np.setdiff1d(np.arange(N), anchors)
    print(f"partially observed workload: 2 views x {N} rows, D={D}, {anchors.size} anchors, "
          f"{2 * N - anchors.size} entities, Q={Q}, M={M}, torch threads={args.threads_large}")
    options = dict(latent_dim=Q, num_inducing=M, progress=False, seed=args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter=0: not converged
        observed = MRD(max_iter=0, **options).fit(views, observed={"b": entity_b})
        paired = MRD(max_iter=0, **options).fit(views)
    times = time_evaluations({"partial": our_evaluator(observed), "paired": our_evaluator(paired)}, reps=3, rounds=3)
    print(f"  one bound+gradient: partially observed {times['partial'][0]:.3f} s, paired (same rows) "
          f"{times['paired'][0]:.3f} s, ratio {times['partial'][0] / times['paired'][0]:.2f}")
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = MRD(max_iter=args.partial_evals, **options).fit(views, observed={"b": entity_b})
    seconds = time.perf_counter() - start
    relevance = np.array([r / r.max() for r in model.relevance_.values()])  # [2, Q]
    both = int(np.argmax(relevance.min(0)))
    tracking = [abs(np.corrcoef(model.embedding_.means[name][unaligned, both], np.sin(t[unaligned]))[0, 1])
                for name in ("a", "b")]
    print(f"  fit: {seconds:.1f} s, {model.n_iter_} evaluations (converged: {model.converged_}; 99.9% of the "
          f"improvement after {evaluations_to(model.history_)}), bound {model.elbo():.1f}, shared dims "
          f"{model.shared_dims().tolist()}; the dimension most relevant to both (relevances "
          f"{np.round(relevance[:, both], 3).tolist()}) tracks sin(t) on the unaligned rows of a / b at |corr| "
          f"{tracking[0]:.3f} / {tracking[1]:.3f}"
          + (f"; warnings: {sorted({type(w.message).__name__ for w in caught})}" if caught else ""))


def memory(args):
    """Peak resident memory added by one bound+gradient evaluation, in a fresh process per N."""
    import subprocess
    import sys
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    print("memory of one bound+gradient (2 views, D=100, Q=10, M=100), fresh process per N:")
    for N in (500, 1000, 2000, 4000):
        out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE.format(here=here, N=N)], capture_output=True,
                             text=True, check=True)
        print(f"  N={N:5d}: +{float(out.stdout.strip()):6.1f} MB peak RSS")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evals", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=300, help="GPy's warm-up (noise fixed) evaluations")
    parser.add_argument("--precondition-after", type=int, default=MRD().precondition_after,
                        help="bayesalign's precondition_after (-1: None, never)")
    parser.add_argument("--our-warmup", type=int, default=MRD().warmup_iters,
                        help="bayesalign's warm-up evaluations (default: MRD's default)")
    parser.add_argument("--init", default=MRD().init, help="bayesalign's init (default: MRD's default)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the larger workload")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4],
                        help="data and initialisation seeds of the reference workload")
    parser.add_argument("--large", action="store_true", help="also run the N=2000 workload")
    parser.add_argument("--large-evals", type=int, default=300)
    parser.add_argument("--threads-large", type=int, default=1,
                        help="torch threads for the N=2000 fit (on a loaded 2-core machine 2 threads measured "
                             "10x slower than 1: the threads wait for each other)")
    parser.add_argument("--large-dtypes", default="float64", help="comma-separated, e.g. float64,float32")
    parser.add_argument("--gpy-large", action="store_true", help="time one GPy evaluation at N=2000")
    parser.add_argument("--memory", action="store_true", help="peak memory of one evaluation against N")
    parser.add_argument("--real", default=None, help="a shipped dataset (e.g. mfeat): MRD from 'pca' and 'cca'")
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--partial", action="store_true", help="the partially observed workload (2 x 2000 rows)")
    parser.add_argument("--partial-evals", type=int, default=1000)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()} on {os.cpu_count()} cores (a shared machine inflates all times)")
    if not args.skip_reference:
        reference(args)
    if args.large:
        large(args)
    if args.memory:
        memory(args)
    if args.real:
        real(args)
    if args.partial:
        partial(args)


if __name__ == "__main__":
    main()
