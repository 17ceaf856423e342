"""Benchmark: one bound-relevant psi evaluation (psi1 + psi2, forward + backward), RBF-ARD kernel.

Reference path (plain torch autograd) vs fast path (custom autograd Function) vs GPy's psi
computation (values + ``update_gradients_expectations`` / ``gradients_Z_expectations`` /
``gradients_qX_expectations``), single-threaded, side by side; then CUDA when available.
The gradients of the three are cross-checked before timing.

Then the whole collapsed bound + gradient of one view (D=100 outputs, kernel ``rbf+bias+white``, the
default): the model's evaluation (``LatentGPModule.evaluate_with_gradient``, the RBF Function inside)
against the same bound with the plain-torch psi-statistics, and GPy's ``BayesianGPLVM`` on the same data,
interleaved round by round; the bounds are printed beside each other (ours equal to GPy's to round-off
for the same parameters is tested in tests/test_mrd.py). This is the workload on which a custom Function
must pay at least 1.5x to stay.

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 python benchmarks/bench_psi.py [--n 2000 --m 100 --q 10]
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from bayesalign.gp.kernels import make_kernel  # noqa: E402
from bayesalign.gp.psi import psi_statistics  # noqa: E402


def make_problem(N, M, Q, seed=0):
    rng = np.random.default_rng(seed)
    return dict(
        mu=rng.normal(size=(N, Q)),
        S=rng.uniform(0.05, 0.5, size=(N, Q)),
        Z=rng.normal(size=(M, Q)),
        lengthscale=rng.uniform(0.8, 3.0, size=Q),
        variance=1.3,
        dL_dpsi1=rng.normal(size=(N, M)),
        dL_dpsi2=(lambda B: B + B.T)(rng.normal(size=(M, M))),
    )


def torch_evaluation(problem, fast, dtype, device):
    """Returns run() -> grads (mu, S, Z, variance, lengthscale), timing one forward + backward."""
    Q = problem["mu"].shape[1]
    kernel = make_kernel("rbf", Q, dtype=torch.float64)
    kernel.base_kernel.lengthscale = torch.tensor(problem["lengthscale"], dtype=torch.float64)
    kernel.outputscale = torch.tensor(problem["variance"], dtype=torch.float64)
    kernel = kernel.to(dtype=dtype, device=device)

    def tensor(x, grad=False):
        return torch.tensor(x, dtype=dtype, device=device, requires_grad=grad)

    mu, S, Z = tensor(problem["mu"], True), tensor(problem["S"], True), tensor(problem["Z"], True)
    A, B = tensor(problem["dL_dpsi1"]), tensor(problem["dL_dpsi2"])

    def run():
        for x in (mu, S, Z, *kernel.parameters()):
            x.grad = None
        stats = psi_statistics(kernel, mu, S, Z, fast=fast)
        loss = (stats.psi1 * A).sum() + (stats.psi2 * B).sum()
        loss.backward()
        # gradients w.r.t. the constrained values (softplus: d value / d raw = sigmoid(raw))
        raw_l, raw_v = kernel.base_kernel.raw_lengthscale, kernel.raw_outputscale
        return (mu.grad, S.grad, Z.grad, raw_v.grad / torch.sigmoid(raw_v), raw_l.grad / torch.sigmoid(raw_l))

    return run


def gpy_evaluation(problem):
    import GPy
    from GPy.core.parameterization.variational import NormalPosterior

    Q = problem["mu"].shape[1]
    kern = GPy.kern.RBF(Q, variance=problem["variance"], lengthscale=problem["lengthscale"], ARD=True)
    N = problem["mu"].shape[0]

    def run():
        # fresh arrays each time: GPy caches psi-statistics on its inputs' identity
        qx = NormalPosterior(problem["mu"].copy(), problem["S"].copy())
        Z = problem["Z"].copy()
        kern.psi1(Z, qx)
        kern.psi2(Z, qx)
        args = (np.zeros(N), problem["dL_dpsi1"], problem["dL_dpsi2"], Z, qx)
        kern.update_gradients_expectations(*args)
        dZ = kern.gradients_Z_expectations(*args)
        dmu, dS = kern.gradients_qX_expectations(*args)
        return dmu, dS, dZ, np.array(kern.variance.gradient), np.array(kern.lengthscale.gradient)

    return run


def best_time(run, repeats, sync=lambda: None):
    """Best wall-clock and best process CPU seconds (the CPU time is robust to a loaded machine)."""
    run()  # warm-up
    sync()
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        sync()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def as_numpy(grads):
    return [g.detach().cpu().double().numpy().reshape(-1) if torch.is_tensor(g) else np.ravel(g) for g in grads]


def max_rel_diff(a, b):
    return max(float(np.abs(x - y).max() / max(1e-300, np.abs(y).max())) for x, y in zip(a, b))


def bound_paths(N, M, Q, D=100, repeats=5, seed=0):
    """Seconds (CPU, best of ``repeats``) of one bound + gradient of one view per path (module docstring)."""
    from bayesalign.gp.bound import collapsed_bound
    from bayesalign.gp.module import LatentGPModule

    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(N, D))
    Y -= Y.mean(0)
    mu, S, Z = rng.normal(size=(N, Q)), rng.uniform(0.05, 0.5, size=(N, Q)), rng.normal(size=(M, Q))
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    kernel = make_kernel("rbf+bias+white", Q)
    module = LatentGPModule([t(Y)], t(mu), t(S), t(Z[None]), [kernel], t([0.1]), t([1e-6]), 1e-6)

    def plain():
        for p in module.parameters():
            p.grad = None
        S_ = module.q_variance
        stats = psi_statistics(kernel, module.q_mean, S_, module.inducing(0), fast=False)
        bound = collapsed_bound(module.outputs(0), module.noise[0], module.kuu(0), *stats) - module.kl(S_)
        (-bound).backward()
        return bound.item()

    runs = {"bayesalign (RBF Function)": module.evaluate_with_gradient, "bayesalign (plain torch psi)": plain}
    try:
        import GPy

        gm = GPy.models.BayesianGPLVM(Y, Q, X=mu.copy(), X_variance=S.copy(), Z=Z.copy(), num_inducing=M,
                                      kernel=GPy.kern.RBF(Q, ARD=True) + GPy.kern.Bias(Q) + GPy.kern.White(Q))
        gm.kern.parts[1].variance = 1e-2  # make_kernel's bias and white variances, and our noise
        gm.kern.parts[2].variance = 1e-6
        gm.likelihood.variance = 0.1
        x = gm.optimizer_array.copy()
        step = [0]

        def gpy():
            step[0] += 1
            return -gm._objective_grads(x + 1e-12 * step[0])[0]

        runs["GPy BayesianGPLVM"] = gpy
    except ImportError:
        print("GPy not installed: skipped")
    values = {name: run() for name, run in runs.items()}
    best = {name: math.inf for name in runs}
    for _ in range(repeats):  # interleaved, so that every path sees the same machine load
        for name, run in runs.items():
            cpu = time.process_time()
            run()
            best[name] = min(best[name], time.process_time() - cpu)
    print(f"collapsed bound + gradient, one view, N={N} M={M} Q={Q} D={D}, rbf+bias+white, 1 thread, "
          f"CPU s, best of {repeats} (the same parameters; Kuu's jitter differs)")
    fused = best["bayesalign (RBF Function)"]
    for name, seconds in best.items():
        print(f"  {name:30s} bound {values[name]:16.6f} {seconds:8.3f} s   this/RBF Function {seconds / fused:5.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--m", type=int, default=100)
    parser.add_argument("--q", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-bound", action="store_true", help="skip the bound + gradient per path")
    args = parser.parse_args()
    torch.set_num_threads(1)
    problem = make_problem(args.n, args.m, args.q)
    print(f"psi1 + psi2 forward + backward, RBF-ARD, N={args.n} M={args.m} Q={args.q}, 1 thread, "
          f"best of {args.repeats}")

    rows = {}
    runs = {
        ("reference", "float64"): torch_evaluation(problem, False, torch.float64, "cpu"),
        ("fast", "float64"): torch_evaluation(problem, True, torch.float64, "cpu"),
        ("reference", "float32"): torch_evaluation(problem, False, torch.float32, "cpu"),
        ("fast", "float32"): torch_evaluation(problem, True, torch.float32, "cpu"),
    }
    try:
        runs[("GPy", "float64")] = gpy_evaluation(problem)
    except ImportError:
        print("GPy not installed: skipped")

    grads = {key: as_numpy(run()) for key, run in runs.items()}
    ref = grads[("reference", "float64")]
    for key, g in grads.items():
        print(f"  gradients {key[0]:>9s} {key[1]}: max relative difference to reference float64 "
              f"{max_rel_diff(g, ref):.1e}")

    for key, run in runs.items():
        rows[key] = best_time(run, args.repeats)
    base = rows.get(("GPy", "float64"))
    ref64 = rows[("reference", "float64")]
    header = ("path", "dtype", "wall s", "CPU s", "GPy/this (CPU)", "reference/this (CPU)")
    print("{:>10s} {:>8s} {:>8s} {:>8s} {:>15s} {:>21s}".format(*header))
    for (path, dtype), (wall, cpu) in rows.items():
        vs_gpy = f"{base[1] / cpu:.2f}x" if base else "n/a"
        print(f"{path:>10s} {dtype:>8s} {wall:8.3f} {cpu:8.3f} {vs_gpy:>15s} {ref64[1] / cpu:20.2f}x")

    if torch.cuda.is_available():
        sync = torch.cuda.synchronize
        for fast in (False, True):
            for dtype in (torch.float64, torch.float32):
                run = torch_evaluation(problem, fast, dtype, "cuda")
                err = max_rel_diff(as_numpy(run()), ref)
                wall, _ = best_time(run, args.repeats, sync)
                name = "fast" if fast else "reference"
                print(f"{name:>10s} {str(dtype)[6:]:>8s} cuda {wall:8.4f} s wall, gradients rel. diff {err:.1e}")
    else:
        print("cuda: not available, skipped")
    if not args.skip_bound:
        bound_paths(args.n, args.m, args.q, repeats=args.repeats)


if __name__ == "__main__":
    main()
