"""The stochastic MRD engine (bayesalign.gp.StochasticMRD): agreement with the collapsed bound, non-Gaussian
views, and scale, side by side with GPyTorch's Bayesian GPLVM and Pyro's GPLVM.

--agreement: the reference workload of ``bench_mrd.py`` (2 views, N=100, D=20, Q=5, M=20, ``make_views``):
  the collapsed MRD (1000 L-BFGS evaluations, defaults) and the SVI engine from the same PCA start
  (full batch, Adam with ``--lr`` 0.05, natural gradients on q(u) with ``--ngd-lr`` 0.5, q(X) variances
  starting at ``--init-variance`` 0.01); both bounds (the SVI one averaged over 256 draws of X,
  with its standard error), their relative gap, and each model's shared dimensions; then the SVI bound at
  the collapsed optimum (``load_collapsed``) and after ``--warm-epochs`` more SVI epochs from there.
  ``--optimizer lbfgs``: the SVI fit is full-batch L-BFGS with q(u) at its optimum at every evaluation
  (``StochasticMRD(optimizer="lbfgs")``; ``--epochs`` counts ELBO evaluations, 3000 by default). After the
  SVI fit, the collapsed MRD is also fitted from the SVI fit's q(X) means (same optimum of the same bound?).
--convergence: ``StochasticMRD()`` at its defaults (and from ``--inits``) against ``MRD()`` at its defaults on the
  reference toy of ``tests/test_mrd.py`` and the shipped real pairs at their sizes (``--only`` picks by name): both
  bounds, the SVI one with q(u) at its optimum (``collapsed_elbo``), their gap, and whether the SVI fit called
  itself converged.
--likelihood: ``MAD(engine="svi")`` on MAD's toy ("linear_shared_private", N=100, 20 anchors) with view Y2
  binarised at each column's median (or Poisson counts, ``--counts``), fitted with the right likelihood
  (``engine_options={"likelihood": {"Y2": ...}}``) and with Y2 treated as Gaussian; the unaligned rows matched by
  the Hungarian method on the likelihood cost. Accuracy (fraction matched to their true partner) over
  ``--seeds``; MAD matches in the dimensions both views resolve under their own likelihoods
  (``StochasticMRD.resolution_``).
--scale: 2 views, N=100,000, D=50 each, Q=10, M=128 (random smooth maps of a 10-d latent): seconds per
  epoch (minibatches of ``--batch-size`` entities) and the peak resident memory of one process per model,
  for this engine, GPyTorch's Bayesian GPLVM (``gpytorch.models.gplvm``, its example's model over both
  views concatenated, one batch GP per output) and Pyro's GPLVM (``pyro.contrib.gp.models.GPLVM`` over a
  ``VariationalSparseGP``, full batch: one step is one epoch). ``--epochs`` epochs each, each model in its
  own process under an address-space limit of ``--memory-limit-gb`` (default 4 GB): one that needs more
  fails with a MemoryError, reported as such; beside the wall time, the process's CPU seconds per epoch (a fairer
  clock on a shared machine). ``--scale-one ours`` runs only this engine in this process
  and prints its ELBO per epoch (the noise held for ``--warmup-epochs``, default 2).

--missing 0.2: ``MAD(engine="svi")`` on MAD's toy (``--toy``, "linear_shared_private" by default, or
  "linear_shared"; N=100, 20 anchors) with both views Gaussian, complete against
  20% of the entries of each view set to NaN at random (``Views(..., allow_missing=True)``: left out of the
  likelihood, never imputed); accuracy of both over ``--seeds`` (``--optimizer lbfgs`` for the full-batch
  optimiser, ``--init pca`` for StochasticMRD's PCA start instead of MAD's joint-Laplacian one). Beside it an
  oracle that is told the latent points that generated the toy: each view's linear map and noise fitted by
  least squares on them, then the exact Gaussian posterior of the shared latent from each row's observed
  entries, matched the same way (on its marginal variances, as MAD's diagonal cost) and on its full
  covariance (a holed row's posterior is tilted its own way); its loss from the holes is what the data
  themselves cost.
--resolution: ``StochasticMRD.resolution_`` on ``--n`` rows of the scale workload (one epoch fitted first):
  seconds of the derivatives of the predictive mean through ``ViewGP.mean_jacobian`` (k(x, Z) alpha) against
  reverse mode through GPyTorch's predictive mean (``ViewGP.marginals``, what it did before), side by side in
  one run, and the largest relative difference of the two resolutions.

--convergence: the default StochasticMRD (``--inits`` auto, i.e. the collapsed start, and pca beside it) against
  the collapsed MRD (its defaults) on the reference toy of tests/test_mrd.py (2 views, N=100, D=10, Q=3, M=15), on
  mocap and on the digit halves (digit 0, and all digits: more entities than the collapsed start's subsample),
  Q=5, M=20: both bounds on the same footing (the SVI ELBO with q(u) at its optimum given the other parameters),
  their relative gap, whether the SVI fit says it converged, its epochs and the seconds of each fit.

Run:  python benchmarks/bench_svi.py --convergence [--only toy mocap]
      python benchmarks/bench_svi.py --agreement
      python benchmarks/bench_svi.py --likelihood [--counts] [--seeds 0 1 2] [--init pca]
      python benchmarks/bench_svi.py --missing 0.2 --optimizer lbfgs --init pca --seeds 0 1 2 3 4
      python benchmarks/bench_svi.py --scale [--epochs 1] [--which ours gpytorch pyro]
      python benchmarks/bench_svi.py --scale-one ours --epochs 40 --threads 2 [--dtype float64]
      python benchmarks/bench_svi.py --resolution --n 10000 --threads 1
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))


def agreement(args):
    from bench_mrd import make_views

    from bayesalign.gp import MRD, StochasticMRD

    views = make_views(100, 20, args.seed)
    start = time.perf_counter()
    mrd = MRD(latent_dim=5, num_inducing=20, max_iter=1000, progress=False, seed=args.seed).fit(views)
    t_mrd = time.perf_counter() - start
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if args.optimizer == "lbfgs":
            svi = StochasticMRD(latent_dim=5, num_inducing=20, batch_size=100, max_epochs=args.epochs or 3000,
                                warmup_epochs=100, optimizer="lbfgs", init_variance=args.init_variance,
                                progress=False, seed=args.seed).fit(views)
        else:
            svi = StochasticMRD(latent_dim=5, num_inducing=20, batch_size=100, max_epochs=args.epochs,
                                learning_rate=args.lr, init_variance=args.init_variance,
                                natural_gradient_lr=args.ngd_lr, window=100, tol=1e-5, progress=False,
                                seed=args.seed).fit(views)
    t_svi = time.perf_counter() - start
    draws = np.array([svi.elbo(num_samples=1, seed=s) for s in range(256)])
    elbo, se = draws.mean(), draws.std(ddof=1) / np.sqrt(draws.size)
    bound = mrd.elbo()
    print(f"reference workload (N=100, D=20 x 2, Q=5, M=20), seed {args.seed}")
    print(f"  collapsed MRD bound      {bound:10.2f}   ({t_mrd:.1f} s, {mrd.n_iter_} evaluations), "
          f"shared dims {mrd.shared_dims().tolist()}")
    unit = "evaluations" if args.optimizer == "lbfgs" else "epochs"
    print(f"  SVI ELBO (256 draws)     {elbo:10.2f} +- {se:.2f}   ({t_svi:.1f} s, {svi.n_epochs_} {unit}, converged "
          f"{svi.converged_}{', ' + str(len(caught)) + ' warning(s)' if caught else ''}), "
          f"shared dims {svi.shared_dims().tolist()}")
    print(f"  gap (bound - ELBO) / |bound| = {(bound - elbo) / abs(bound):.4f}")
    # the collapsed engine from the SVI fit's q(X) means (its own hyperparameter start): the same optimum?
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = MRD(latent_dim=5, num_inducing=20, max_iter=1000, init=svi.entity_means_, progress=False,
                    seed=args.seed).fit(views)
    print(f"  collapsed MRD from the SVI fit's q(X) means: bound {again.elbo():.2f} ({again.n_iter_} evaluations), "
          f"gap to the SVI ELBO {(again.elbo() - elbo) / abs(again.elbo()):.4f}, "
          f"shared dims {again.shared_dims().tolist()}")
    # the same bound from the collapsed optimum: q(X), hyperparameters, inducing inputs and optimal q(u) loaded,
    # then SVI continues (smaller steps): how far the stochastic optimiser holds, or loses, the optimum
    warm = StochasticMRD(latent_dim=5, num_inducing=20, batch_size=100, max_epochs=0, progress=False,
                         seed=args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warm.fit(views).load_collapsed(mrd)
        at_optimum = np.array([warm.elbo(num_samples=1, seed=s) for s in range(256)])
        warm.set_params(warm_start=True, max_epochs=args.warm_epochs, warmup_epochs=0, learning_rate=0.005,
                        natural_gradient_lr=0.1).fit(views)
    held = np.array([warm.elbo(num_samples=1, seed=s) for s in range(256)])
    for label, draws in (("SVI ELBO at the collapsed optimum", at_optimum),
                         (f"... after {args.warm_epochs} more SVI epochs", held)):
        print(f"  {label:38s} {draws.mean():10.2f} +- {draws.std(ddof=1) / 16:.2f}   gap "
              f"{(bound - draws.mean()) / abs(bound):.4f}")
    print(f"  shared dims after the warm-started epochs {warm.shared_dims().tolist()}")
    print(f"  relevance MRD {dict((k, np.round(v / v.max(), 3).tolist()) for k, v in mrd.relevance_.items())}")
    print(f"  relevance SVI {dict((k, np.round(v / v.max(), 3).tolist()) for k, v in svi.relevance_.items())}")
    # MAD's rule: the dimensions both views resolve
    from bayesalign.gp import shared_dimensions

    for label, model in (("MRD", mrd), ("SVI", svi)):
        resolution = model.resolution_
        dims = shared_dimensions(resolution, 1.0, fallback=True, relative=False)
        print(f"  resolution {label} {dict((k, np.round(v, 1).tolist()) for k, v in resolution.items())}, "
              f"shared by resolution (min_resolution 1) {np.asarray(dims).tolist()}")


def convergence(args):
    """The default StochasticMRD against the collapsed MRD on the reference problems (see the module docstring)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from test_mrd import toy_views  # the reference toy of tests/test_mrd.py

    import bayesalign as ba
    from bayesalign.gp import MRD, StochasticMRD

    problems = {"toy N=100 D=10 (Q=3, M=15)": (toy_views(N=100, D=10, seed=0), 3, 15)}
    for name, problem in (("mocap", ba.datasets.mocap()), ("digits_halves(0)", ba.datasets.digits_halves()),
                          ("digits_halves(all)", ba.datasets.digits_halves(digit=None)),
                          ("protein 1-21", ba.datasets.protein(models=(1, 21))),
                          ("mfeat fou-kar", ba.datasets.mfeat(("fou", "kar")))):
        views = {k: problem.views[k] for k in problem.views.names}
        problems[f"{name} N={len(next(iter(views.values())))} (Q=5, M=20)"] = (views, 5, 20)
    print("collapsed MRD (defaults) against StochasticMRD (defaults; init as given); SVI bound = its ELBO with q(u) "
          "at its optimum (= the collapsed bound at its other parameters); gap = (MRD - SVI) / |MRD|")
    print(f"  {'problem':38s} {'init':9s} {'MRD':>11s} {'SVI':>11s} {'gap':>7s} {'converged':>9s} {'epochs':>6s} "
          f"{'s MRD':>6s} {'s SVI':>6s}")
    for name, (views, Q, M) in problems.items():
        if args.only and not any(o in name for o in args.only):
            continue
        start = time.perf_counter()
        mrd = MRD(latent_dim=Q, num_inducing=M, progress=False, seed=args.seed).fit(views)
        t_mrd, bound = time.perf_counter() - start, mrd.elbo()
        for init in args.inits:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                svi = StochasticMRD(latent_dim=Q, num_inducing=M, init=init, progress=False, seed=args.seed).fit(views)
            t_svi = time.perf_counter() - start
            try:
                value, mark = svi.collapsed_elbo(), " "
            except FloatingPointError:  # q(u)'s optimum not positive definite in float64: the SVI ELBO at its own
                value, mark = svi.elbo(), "*"  # q(u), a lower bound on the same-footing value
            print(f"  {name:38s} {init:9s} {bound:11.5g} {value:11.5g} {(bound - value) / abs(bound):7.2%}{mark}"
                  f"{str(svi.converged_):>9s} {svi.n_epochs_:6d} {t_mrd:6.0f} {t_svi:6.0f}", flush=True)


def _mad_accuracy(problem, views, seed, args, likelihood=None):
    """Accuracy of ``ba.MAD(engine="svi")`` (Hungarian, likelihood cost) on ``views``, and its shared dimensions."""
    import bayesalign as ba

    options = dict(batch_size=200, max_epochs=args.epochs, learning_rate=0.05, init_variance=0.01,
                   natural_gradient_lr=0.5, optimizer=args.optimizer,
                   warmup_epochs=100 if args.optimizer == "lbfgs" else 50)
    if likelihood is not None:
        options["likelihood"] = likelihood
    if args.init != "joint-laplacian":  # MAD's own start otherwise
        options["init"] = args.init
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mad = ba.MAD(latent_dim=5, num_inducing=20, engine="svi", seed=seed, progress=False,
                     engine_options=options).fit(problem.replace(views=views))
    return ba.metrics.matching_accuracy(mad.align(matcher="hungarian"), problem), len(mad.shared_dims("Y1", "Y2"))


def likelihood(args):
    import bayesalign as ba

    name = "poisson" if args.counts else "bernoulli"
    print(f"MAD toy linear_shared_private, N=100, 20 anchors, Y2 as {'Poisson counts' if args.counts else 'binary'}; "
          f"MAD(engine='svi', init={args.init!r}), {args.epochs} epochs, Hungarian on the likelihood cost")
    results = {name: [], "gaussian": []}
    for seed in args.seeds:
        problem = ba.datasets.mad_toy("linear_shared_private", seed=seed, n=100, n_anchors=20)
        Y2 = problem.views["Y2"]
        if args.counts:
            rng = np.random.default_rng(seed)
            Y2 = rng.poisson(np.exp((Y2 - Y2.mean(0)) / Y2.std(0))).astype(float)
        else:
            Y2 = (Y2 > np.median(Y2, 0)).astype(float)
        views = ba.Views({"Y1": problem.views["Y1"], "Y2": Y2})
        for lik in (name, "gaussian"):
            start = time.perf_counter()
            acc, n_shared = _mad_accuracy(problem, views, seed, args, likelihood={"Y2": lik})
            results[lik].append(acc)
            print(f"  seed {seed}: Y2 {lik:10s} accuracy {acc:.3f} ({n_shared} shared dims, "
                  f"{time.perf_counter() - start:.1f} s)", flush=True)
    for lik, accs in results.items():
        print(f"  mean accuracy, Y2 {lik:10s}: {np.mean(accs):.3f}")


def missing(args):
    """``ba.MAD(engine="svi")`` on MAD's toy, complete against holed views (``Views(..., allow_missing=True)``)."""
    import bayesalign as ba

    print(f"MAD toy {args.toy}, N=100, 20 anchors, Gaussian views, complete and with {args.missing:.0%} of "
          f"the entries of each view NaN at random; MAD(engine='svi', optimizer={args.optimizer!r}, "
          f"init={args.init!r}), {args.epochs} {'evaluations' if args.optimizer == 'lbfgs' else 'epochs'}, "
          "Hungarian on the likelihood cost")
    results = {"complete": [], "missing": []}
    oracle = {"complete": [], "missing": []}
    for seed in args.seeds:
        problem, latent = ba.datasets.mad_toy(args.toy, seed=seed, n=100, n_anchors=20, return_latent=True)
        rng = np.random.default_rng(1000 + seed)
        holed = {}
        for v in ("Y1", "Y2"):
            Y = problem.views[v].copy()
            Y[rng.random(Y.shape) < args.missing] = np.nan
            holed[v] = Y
        for label, views in (("complete", problem.views), ("missing", ba.Views(holed, allow_missing=True))):
            start = time.perf_counter()
            acc, n_shared = _mad_accuracy(problem, views, seed, args)
            results[label].append(acc)
            oracle[label].append(_oracle_accuracy(problem, latent, views, private=args.toy != "linear_shared"))
            print(f"  seed {seed}: {label:9s} accuracy {acc:.3f} ({n_shared} shared dims, "
                  f"{time.perf_counter() - start:.1f} s); oracle {oracle[label][-1][0]:.3f} (full covariance "
                  f"{oracle[label][-1][1]:.3f})", flush=True)
    mean_oracle = {label: np.mean(values, axis=0) for label, values in oracle.items()}  # [marginal, full]
    for label, accs in results.items():
        print(f"  mean accuracy, {label:9s}: {np.mean(accs):.3f} (oracle {mean_oracle[label][0]:.3f}, full "
              f"covariance {mean_oracle[label][1]:.3f})")
    lost = mean_oracle["complete"] - mean_oracle["missing"]
    print(f"  difference (complete - missing): {np.mean(results['complete']) - np.mean(results['missing']):.3f} "
          f"(oracle {lost[0]:.3f}, full covariance {lost[1]:.3f})")


def _oracle_accuracy(problem, latent, views, private=True):
    """Accuracy of matching with the toy's generating latent known: per view a linear map Y = [x12, x_v] W
    (``private=False``, the toy "linear_shared": Y = x12 W) and the noise variance fitted by least squares on all
    rows, q(x) the exact Gaussian posterior under N(0, var(latent) I) from each unaligned row's observed entries,
    Hungarian on the likelihood cost of x12: (accuracy with its marginal variances, as MAD's diagonal cost; with
    its full covariance C, -log N(mu_i - mu_j; 0, C_i + C_j), which a holed row's tilted posterior needs)."""
    from scipy.optimize import linear_sum_assignment

    import bayesalign as ba

    inputs = {"Y1": latent[:, [2, 3, 0]], "Y2": latent[:, [2, 3, 1]]}  # [x12, x_v], [n, 3]
    if not private:
        inputs = {v: latent[:, [2, 3]] for v in inputs}  # x12 [n, 2]
    prior_var = float(latent.var())
    posteriors = {}
    for v in ("Y1", "Y2"):
        Z, Y = inputs[v], np.asarray(problem.views[v])
        W = np.linalg.lstsq(Z, Y, rcond=None)[0]  # [3, D]
        noise = float(np.mean((Y - Z @ W) ** 2))
        rows = problem.unaligned(v)
        mean, cov = np.zeros((rows.size, 2)), np.zeros((rows.size, 2, 2))
        for k, y in enumerate(np.asarray(views[v])[rows]):
            seen = ~np.isnan(y)
            full = np.linalg.inv(np.eye(W.shape[0]) / prior_var + W[:, seen] @ W[:, seen].T / noise)  # [3, 3]
            mean[k], cov[k] = (full @ W[:, seen] @ y[seen] / noise)[:2], full[:2, :2]
        posteriors[v] = (rows, mean, cov)
    (ra, ma, ca), (rb, mb, cb) = posteriors["Y1"], posteriors["Y2"]
    marginal = ba.matching.likelihood_cost(ma, np.diagonal(ca, axis1=1, axis2=2), mb, np.diagonal(cb, axis1=1, axis2=2))
    C = ca[:, None] + cb[None]  # [n_a, n_b, 2, 2]
    d = ma[:, None] - mb[None]
    joint = 0.5 * np.einsum("abi,abij,abj->ab", d, np.linalg.inv(C), d) + 0.5 * np.linalg.slogdet(C)[1]
    out = []
    for cost in (marginal, joint):
        r, c = linear_sum_assignment(cost)
        out.append(float(np.mean(ra[r] == rb[c])))  # the toy's views are paired row by row
    return tuple(out)


def _scale_data(N, D, Q, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, Q)).astype(np.float32)
    views = []
    for _ in range(2):
        W = rng.standard_normal((Q, D)).astype(np.float32) / np.sqrt(Q)
        Y = np.tanh(X @ W) + 0.1 * rng.standard_normal((N, D)).astype(np.float32)
        views.append(Y)
    return views


def resolution_timing(args):
    """Seconds of StochasticMRD.resolution_ through ViewGP.mean_jacobian against reverse mode through marginals."""
    from bayesalign.gp import StochasticMRD
    from bayesalign.gp.svi.guide import ViewGP

    torch.set_num_threads(args.threads)
    views = _scale_data(args.n, 50, 10)
    svi = StochasticMRD(latent_dim=10, num_inducing=128, batch_size=2048, max_epochs=1, init="pca", progress=False,
                        seed=0, dtype=args.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        svi.fit({"a": views[0], "b": views[1]})

    def through_marginals(gp, x):  # the reference: one reverse pass per output through GPyTorch's predictive mean
        x = x.detach().clone().requires_grad_(True)
        with torch.enable_grad():
            f = gp.marginals(x)[0]
            J = torch.stack([torch.autograd.grad(f[:, d].sum(), x, retain_graph=d < f.shape[1] - 1)[0]
                             for d in range(f.shape[1])], -1)
        return f.detach(), J

    start = time.perf_counter()
    fast = svi.resolution_
    t_fast = time.perf_counter() - start
    original = ViewGP.mean_jacobian
    ViewGP.mean_jacobian = through_marginals
    try:
        start = time.perf_counter()
        reference = svi.resolution_
        t_reference = time.perf_counter() - start
    finally:
        ViewGP.mean_jacobian = original
    difference = max(float(np.max(np.abs(fast[v] - reference[v]) / np.max(np.abs(reference[v])))) for v in fast)
    print(f"resolution_ of {args.n} rows x 2 views (D=50, Q=10, M=128, {args.dtype}, {args.threads} thread(s)): "
          f"mean_jacobian {t_fast:.1f} s, reverse mode through marginals {t_reference:.1f} s "
          f"({t_reference / t_fast:.0f}x); largest relative difference {difference:.1e}")


def _cpu_seconds():
    """User + system CPU seconds of this process (on a shared machine a fairer clock than the wall)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def scale_one(which, args):
    """One model in this process: prints 'RESULT which seconds_per_epoch peak_MB final_loss cpu_seconds_per_epoch'."""
    torch.set_num_threads(args.threads)
    # an address-space cap, so that a model needing more fails cleanly instead of swapping a shared machine
    limit = int(args.memory_limit_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    N, D, Q, M, B = args.n, args.d, args.q, args.m, args.batch_size
    views = _scale_data(N, D, Q)
    dtype = getattr(torch, args.dtype)  # StochasticMRD only; the data and the other models are float32
    if which == "ours":
        from bayesalign.gp import StochasticMRD

        times = []
        model = StochasticMRD(latent_dim=Q, num_inducing=M, batch_size=B, max_epochs=args.epochs,
                              init=args.scale_init, learning_rate=args.lr, warmup_epochs=args.warmup_epochs,
                              dtype=dtype, device=args.device, progress=False, seed=0)
        start, cpu = time.perf_counter(), _cpu_seconds()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit({"a": views[0], "b": views[1]})
        times, cpu = (time.perf_counter() - start) / args.epochs, (_cpu_seconds() - cpu) / args.epochs
        print(f"ELBO per epoch {np.array2string(model.elbo_history_, precision=4)}; natural-gradient step "
              f"{model.natural_gradient_lr_} after {model.natural_gradient_halvings_} halving(s); "
              f"{time.perf_counter() - start:.0f} s in all", flush=True)
        tail = np.diff(model.elbo_history_[-4:]) / np.abs(model.elbo_history_[-4:-1])
        print(f"relative ELBO change over the last 3 epochs {', '.join(f'{x:.1e}' for x in tail)}; "
              f"converged_ {model.converged_}", flush=True)
        print(f"RESULT ours {times:.2f} {_peak_mb():.0f} {model.elbo_history_[-1]:.6g} {cpu:.2f}", flush=True)
    elif which == "gpytorch":
        import gpytorch
        from gpytorch.likelihoods import GaussianLikelihood
        from gpytorch.mlls import VariationalELBO
        from gpytorch.models.gplvm import BayesianGPLVM, VariationalLatentVariable
        from gpytorch.priors import NormalPrior
        from gpytorch.variational import CholeskyVariationalDistribution, VariationalStrategy

        Y = torch.tensor(views[0], dtype=dtype)  # [N, D]: one view, the example's model (bayesalign fits two)

        class GPLVM(BayesianGPLVM):  # GPyTorch's Bayesian GPLVM example model
            def __init__(self, n, data_dim, latent_dim, n_inducing):
                self.batch_shape = torch.Size([data_dim])
                inducing = torch.randn(data_dim, n_inducing, latent_dim)
                q_u = CholeskyVariationalDistribution(n_inducing, batch_shape=self.batch_shape)
                q_f = VariationalStrategy(self, inducing, q_u, learn_inducing_locations=True)
                prior_x = NormalPrior(torch.zeros(n, latent_dim), torch.ones(n, latent_dim))
                X = VariationalLatentVariable(n, data_dim, latent_dim, torch.randn(n, latent_dim), prior_x)
                super().__init__(X, q_f)
                self.mean_module = gpytorch.means.ConstantMean(batch_shape=self.batch_shape)
                self.covar_module = gpytorch.kernels.ScaleKernel(
                    gpytorch.kernels.RBFKernel(ard_num_dims=latent_dim))

            def forward(self, X):
                return gpytorch.distributions.MultivariateNormal(self.mean_module(X), self.covar_module(X))

        model = GPLVM(N, Y.shape[1], Q, M).to(dtype)
        lik = GaussianLikelihood(batch_shape=model.batch_shape).to(dtype)
        mll = VariationalELBO(lik, model, num_data=N)
        optimiser = torch.optim.Adam([{"params": model.parameters()}, {"params": lik.parameters()}], lr=0.01)
        start, cpu = time.perf_counter(), _cpu_seconds()
        for _ in range(args.epochs):
            for idx in torch.randperm(N).split(B):
                optimiser.zero_grad()
                sample = model.sample_latent_variable()[idx]
                loss = -mll(model(sample), Y[idx].T).sum()
                loss.backward()
                optimiser.step()
        seconds, cpu = (time.perf_counter() - start) / args.epochs, (_cpu_seconds() - cpu) / args.epochs
        print(f"RESULT gpytorch {seconds:.2f} {_peak_mb():.0f} {-loss.item() * N:.6g} {cpu:.2f}", flush=True)
    elif which == "pyro":
        import pyro
        import pyro.contrib.gp as gp
        import pyro.distributions as dist

        Y = torch.tensor(np.hstack(views)).T  # [2D, N]: Pyro's GPLVM takes outputs as [D, N]
        X_prior = torch.zeros(N, Q)
        kernel = gp.kernels.RBF(input_dim=Q, lengthscale=torch.ones(Q))
        Xu = torch.randn(M, Q)
        vsgp = gp.models.VariationalSparseGP(X_prior.clone(), Y, kernel, Xu, likelihood=gp.likelihoods.Gaussian(),
                                             latent_shape=torch.Size([Y.shape[0]]), whiten=True, jitter=1e-4)
        vsgp.X = pyro.nn.PyroSample(dist.Normal(X_prior, 1.0).to_event())
        gplvm = gp.models.GPLVM(vsgp)
        gplvm.autoguide("X", dist.Normal)
        optimiser = torch.optim.Adam(gplvm.parameters(), lr=0.01)
        loss_fn = pyro.infer.TraceMeanField_ELBO().differentiable_loss
        start, cpu = time.perf_counter(), _cpu_seconds()
        for _ in range(args.epochs):  # full batch: one step per epoch
            optimiser.zero_grad()
            loss = loss_fn(gplvm.model, gplvm.guide)
            loss.backward()
            optimiser.step()
        seconds, cpu = (time.perf_counter() - start) / args.epochs, (_cpu_seconds() - cpu) / args.epochs
        print(f"RESULT pyro {seconds:.2f} {_peak_mb():.0f} {-loss.item():.6g} {cpu:.2f}", flush=True)


def scale(args):
    print(f"scale: N={args.n}, D={args.d} per view, Q={args.q}, M={args.m}, {args.dtype}, {args.threads} thread(s), "
          f"{args.epochs} epoch(s), minibatches of {args.batch_size} (Pyro's GPLVM: full batch); bayesalign fits "
          "two views, GPyTorch's BayesianGPLVM example model one (the first), Pyro's GPLVM both concatenated")
    print(f"  {'model':10s} {'s/epoch':>9s} {'CPU s/epoch':>12s} {'peak MB':>9s} {'last ELBO':>12s}")
    per_epoch, cpu_per_epoch = {}, {}
    for which in args.which:  # one process each: ru_maxrss is a per-process peak
        cmd = [sys.executable, __file__, "--scale-one", which, "--n", str(args.n), "--epochs", str(args.epochs),
               "--batch-size", str(args.batch_size), "--threads", str(args.threads), "--device", args.device,
               "--memory-limit-gb", str(args.memory_limit_gb), "--d", str(args.d), "--q", str(args.q), "--m",
               str(args.m), "--dtype", args.dtype, "--scale-init", args.scale_init]
        out = subprocess.run(cmd, capture_output=True, text=True)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")]
        if not line:
            errors = [ln for ln in out.stderr.splitlines() if "Error" in ln] or out.stderr.strip().splitlines() or ["?"]
            print(f"  {which:10s} failed: {errors[-1].strip()[:200]}")
            continue
        _, name, seconds, peak, elbo, cpu = line[0].split()
        print(f"  {name:10s} {float(seconds):9.2f} {float(cpu):12.2f} {float(peak):9.0f} {float(elbo):12.6g}",
              flush=True)
        per_epoch[name], cpu_per_epoch[name] = float(seconds), float(cpu)
    if "ours" in per_epoch and "gpytorch" in per_epoch:
        print(f"  time per epoch, bayesalign (two views) / GPyTorch's BayesianGPLVM (one view): "
              f"{per_epoch['ours'] / per_epoch['gpytorch']:.2f}x wall, "
              f"{cpu_per_epoch['ours'] / cpu_per_epoch['gpytorch']:.2f}x CPU seconds")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agreement", action="store_true")
    parser.add_argument("--convergence", action="store_true")
    parser.add_argument("--inits", nargs="+", default=["auto", "pca"])
    parser.add_argument("--only", nargs="+", default=None, help="--convergence: problems whose name contains one")
    parser.add_argument("--likelihood", action="store_true")
    parser.add_argument("--scale", action="store_true")
    parser.add_argument("--resolution", action="store_true")
    parser.add_argument("--scale-one", choices=["ours", "gpytorch", "pyro"])
    parser.add_argument("--which", nargs="+", default=["ours", "gpytorch", "pyro"])
    parser.add_argument("--counts", action="store_true")
    parser.add_argument("--missing", type=float, default=None, metavar="FRACTION",
                        help="complete views against this fraction of NaN entries (MAD's toy)")
    parser.add_argument("--toy", choices=["linear_shared", "linear_shared_private"], default="linear_shared_private",
                        help="MAD's toy of --missing")
    parser.add_argument("--init", choices=["joint-laplacian", "pca"], default="joint-laplacian",
                        help="--missing, --likelihood: q(X)'s start")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--optimizer", choices=["adam", "lbfgs"], default="adam")
    parser.add_argument("--warm-epochs", type=int, default=1000)
    parser.add_argument("--init-variance", type=float, default=0.01)
    parser.add_argument("--ngd-lr", type=float, default=0.5)
    parser.add_argument("--warmup-epochs", type=int, default=2,
                        help="--scale: epochs with the noise held (StochasticMRD's warmup_epochs)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                        help="--scale-one ours, --resolution: StochasticMRD's dtype")
    parser.add_argument("--scale-init", choices=["random", "pca"], default="random",
                        help="--scale-one ours: StochasticMRD's start of q(X) (random as GPyTorch's example; "
                             "pca is the class default)")
    parser.add_argument("--memory-limit-gb", type=float, default=4.0)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--d", type=int, default=50, help="--scale: outputs per view")
    parser.add_argument("--q", type=int, default=10, help="--scale: latent dimensions")
    parser.add_argument("--m", type=int, default=128, help="--scale: inducing inputs")
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.scale_one:
        args.epochs = args.epochs or 1
        return scale_one(args.scale_one, args)
    if args.convergence:
        convergence(args)
    if args.agreement:
        args.epochs = args.epochs or 3000
        agreement(args)
    if args.likelihood:
        args.epochs = args.epochs or 600
        likelihood(args)
    if args.missing is not None:
        args.epochs = args.epochs or 1500
        missing(args)
    if args.scale:
        args.epochs = args.epochs or 1
        scale(args)
    if args.resolution:
        resolution_timing(args)


if __name__ == "__main__":
    main()
