"""MADEnsemble: the pooled cost is the product of the members' tempered match likelihoods, checked against an
independent Gaussian density; it aligns, calibrates and refuses what it cannot pool."""

import copy
import json
import os
import warnings

import numpy as np
import pytest
import torch
from joblib import cpu_count
from scipy.stats import multivariate_normal
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

import bayesalign as ba
from bayesalign.mad import self_training
from bayesalign.mad.posteriors import anchor_foscttm
from bayesalign.mad.self_training import check_self_training
from bayesalign.matching import sinkhorn_marginals


def _member(latent_dim, **kw):
    return ba.MAD(latent_dim=latent_dim, num_inducing=10, seed=0, engine_options={"max_iter": 120}, **kw)


def _forget(member):
    """A copy of ``member`` that has computed nothing from its fit yet (temperatures, misfit, anchors placed)."""
    member = copy.deepcopy(member)
    member.misfit_, member.calibration_ = {}, {}
    member._calibration_potentials, member._anchor_cache, member._stream = {}, {}, {}
    return member


@pytest.fixture(scope="module")
def pooled():
    # fitted and calibrated at the thread count of each of two loky workers (joblib's share of the cores, or the
    # OMP_NUM_THREADS set), so that the parallel fits of the same members sum in the same order as these
    threads = int(os.environ.get("OMP_NUM_THREADS", max(cpu_count() // 2, 1)))
    problem = ba.datasets.mad_toy("linear_shared", seed=0).split_anchors(20, 0).shuffle_unaligned(seed=0)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with warnings.catch_warnings(), threadpool_limits(threads):
            warnings.simplefilter("ignore")  # the short fits do not converge (warned); irrelevant here
            ensemble = ba.MADEnsemble(estimators=[_member(2), _member(4)]).fit(problem)
            ensemble.member_temperatures()
    finally:
        torch.set_num_threads(before)
    return problem, ensemble


def test_the_pool_is_the_product_of_the_members_tempered_gaussian_match_likelihoods(pooled):
    """P of the pool at T = 1 is Sinkhorn of prod_f N(mu^f_i - mu^f_j; 0, T_f (S^f_i + S^f_j)) in each member's
    compared coordinates, the density evaluated by scipy pair by pair (an independent implementation)."""
    problem, ensemble = pooled
    Ts = ensemble.member_temperatures()
    log_like = 0.0
    for member, T in zip(ensemble.estimators_, Ts):
        p = member.posteriors("Y1", "Y2", "likelihood")
        ma, va, mb, vb = p.mean_a, p.var_a, p.mean_b, p.var_b
        log_like = log_like + np.array([[multivariate_normal.logpdf(ma[i] - mb[j], cov=np.diag(T * (va[i] + vb[j])))
                                         for j in range(len(p.rows_b))] for i in range(len(p.rows_a))])
    np.testing.assert_allclose(ensemble.cost_matrix()[2], -log_like, rtol=1e-9)  # the same sums, another order
    expected, _ = sinkhorn_marginals(-log_like, 1.0, tol=1e-9)
    _, _, P = ensemble.match_probabilities(temperature=1.0)
    # match_probabilities solves Sinkhorn to a marginal error of 1e-3 (its documented tolerance)
    np.testing.assert_allclose(P, expected, atol=2e-3)


def test_the_mean_cost_pools_the_squared_distances_over_the_temperatures(pooled):
    problem, ensemble = pooled
    Ts = ensemble.member_temperatures(cost="mean")
    expected = sum(m.cost_matrix(cost="mean")[2] / T for m, T in zip(ensemble.estimators_, Ts))
    rows_a, rows_b, C = ensemble.cost_matrix(cost="mean")
    np.testing.assert_allclose(C, expected, rtol=1e-10)  # the same sums in another order
    assert np.array_equal(rows_a, ensemble.estimators_[0].cost_matrix()[0])


def test_the_pool_aligns_with_calibrated_probabilities(pooled):
    problem, ensemble = pooled
    alignment = ensemble.align()
    scores = ba.metrics.evaluate(alignment, problem)
    members = [ba.metrics.evaluate(m.align(), problem)["accuracy"] for m in ensemble.estimators_]
    assert scores["accuracy"] >= min(members) - 0.05  # no worse than the weaker member, give or take a row or two
    assert scores["accuracy"] > 0.8  # the linear toy is easy for both members
    T = ensemble.calibrate_temperature()
    assert T > 0 and ensemble.calibration_[("Y1", "Y2", "likelihood")]["pairs"] == 20
    assert alignment.info["members"] == 2 and alignment.info["member_latent_dims"] == [2, 4]
    assert np.all((alignment.probabilities >= 0) & (alignment.probabilities <= 1))
    for matcher in ("myopic", "sinkhorn", "perturb"):
        assert len(ensemble.align(matcher=matcher).index_a) == len(alignment.index_a)
    sparse = ensemble.align(sparse=True)  # kNN candidates in the pooled coordinates
    assert ba.metrics.evaluate(sparse, problem)["accuracy"] == pytest.approx(scores["accuracy"], abs=0.05)
    # the pool's log match probabilities: the log of the probabilities it reports, at its fitted temperature
    rows_a, rows_b, P = ensemble.match_probabilities()
    ra, rb, L = ensemble.match_log_probabilities()
    assert np.array_equal(ra, rows_a) and np.array_equal(rb, rows_b) and np.isfinite(L).all()
    np.testing.assert_allclose(np.exp(L), P, atol=2e-3)  # Sinkhorn stops at a marginal error of 1e-3


def test_from_fitted_pools_the_same_models(pooled):
    problem, ensemble = pooled
    again = ba.MADEnsemble.from_fitted(ensemble.estimators_)
    np.testing.assert_allclose(again.cost_matrix()[2], ensemble.cost_matrix()[2])


def test_a_saved_ensemble_loads_and_aligns_as_the_saved_one(pooled, tmp_path):
    problem, ensemble = pooled
    before = ensemble.align()
    path = tmp_path / "pool.npz"
    ba.mad.save(ensemble, path)
    loaded = ba.mad.load(path)
    assert type(loaded) is ba.MADEnsemble
    after = loaded.align()
    assert np.array_equal(before.index_a, after.index_a) and np.array_equal(before.index_b, after.index_b)
    # the temperatures are fitted again after loading (the same search on the same numbers)
    np.testing.assert_allclose(after.probabilities, before.probabilities, atol=1e-6)
    assert loaded.get_params()["latent_dims"] == [2, 4] and len(loaded.estimators_) == 2
    assert [m.get_params()["num_inducing"] for m in loaded.get_params()["estimators"]] == [10, 10]  # as fitted
    assert len(loaded._members()) == 2  # a refit fits these members again
    # a file whose parameters name scalings ["centred"] loads the same: the members hold their own scaling
    arrays = dict(np.load(path))
    meta = json.loads(str(arrays["meta"]))
    meta["params"]["scalings"] = ["centred"]
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(tmp_path / "centred.npz", **arrays)
    centred = ba.mad.load(tmp_path / "centred.npz")
    assert np.array_equal(centred.align().index_b, before.index_b) and len(centred._members()) == 2
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ba.mad.MADFileError, match="pool.npz"):
        ba.mad.load(path)


def test_a_member_sharing_no_dimension_is_left_out_with_a_warning(pooled, tmp_path):
    problem, ensemble = pooled
    members = []
    for k, member in enumerate(ensemble.estimators_):  # copies through files: the fixture's models stay as fitted
        ba.mad.save(member, tmp_path / f"m{k}.npz")
        members.append(ba.mad.load(tmp_path / f"m{k}.npz"))
    members[1].shared_dims_ = {key: np.zeros(0, np.int64) for key in members[1].shared_dims_}  # found nothing shared
    with pytest.warns(RuntimeWarning, match=r"members \[1\] share no latent dimension"):
        alignment = ba.MADEnsemble.from_fitted(members).align()
    assert alignment.info["members"] == 1 and alignment.info["members_left_out"] == 1
    alone = ba.MADEnsemble.from_fitted(members[:1]).align()
    assert np.array_equal(alignment.index_b, alone.index_b)  # the pool of the other member alone
    members[0].shared_dims_ = members[1].shared_dims_
    with pytest.raises(ValueError, match="no member of the ensemble shares"):
        ba.MADEnsemble.from_fitted(members).align()


def test_what_cannot_be_pooled_is_refused(pooled):
    problem, ensemble = pooled
    other = ba.datasets.mad_toy("linear_shared", seed=0).split_anchors(20, 1).shuffle_unaligned(seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        elsewhere = _member(2).fit(other)
    with pytest.raises(ValueError, match="member 1 was fitted on another problem"):
        ba.MADEnsemble.from_fitted([ensemble.estimators_[0], elsewhere])
    with pytest.raises(TypeError, match=r"models\[0\] is a str"):
        ba.MADEnsemble.from_fitted(["not a model"])
    with pytest.raises(TypeError, match=r"estimators\[1\] is a CCAAlignment"):
        ba.MADEnsemble(estimators=[_member(2), ba.spectral.CCAAlignment()]).fit(problem)
    with pytest.raises(ValueError, match="has none"):
        ba.MADEnsemble().fit(problem.replace(anchors=[]))
    with pytest.raises(ValueError, match="latent_dims"):
        ba.MADEnsemble(latent_dims=(10, 0)).fit(problem)
    with pytest.raises(ValueError, match="cost"):
        ba.MADEnsemble(cost="expected").fit(problem)
    with pytest.raises(AttributeError, match="not fitted"):
        ba.MADEnsemble().align()


def test_members_fitted_in_worker_processes_are_the_same_fits_and_their_warnings_come_back(pooled):
    # the same seeded fits in two loky workers as one after the other here. The workers may run at another thread
    # count than this process (joblib gives each its share of the cores), so BLAS sums in another order and 120
    # L-BFGS-B steps amplify the round-off. The reference fits ran at the workers' thread count (see pooled), so
    # the bounds agree to 1e-4 relative and at least 95% of the pairs are the same
    problem, ensemble = pooled
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        parallel = ba.MADEnsemble(estimators=[_member(2), _member(4)], n_jobs=2).fit(problem)
    for k, q in enumerate((2, 4)):  # each short fit stops at max_iter: said in the worker, issued here
        assert any(f"member {k} (latent_dim {q}): MAD: the fit kept stopped" in str(w.message) for w in record)
    for serial, worker in zip(ensemble.estimators_, parallel.estimators_):
        np.testing.assert_allclose(worker.model_.history_[-1], serial.model_.history_[-1], rtol=1e-4)
    # each worker also fitted its member's temperature between the first two views (align's default pair): it came
    # back with the member, so aligning sends nothing to the workers again, and it is the temperature fitted here
    dispatched, each_member = [], parallel._each_member
    parallel._each_member = lambda function, *rest: dispatched.append(function.__name__) or each_member(function,
                                                                                                       *rest)
    key = ("Y1", "Y2", "likelihood")
    assert all(key in worker.calibration_ for worker in parallel.estimators_)
    # (fits that differ by round-off may end their searches at other points within the 5% tolerance in T)
    np.testing.assert_allclose(parallel.member_temperatures(), ensemble.member_temperatures(), rtol=0.06)
    assert dispatched == []
    same = {tuple(p) for p in parallel.align().pairs.tolist()} & {tuple(p) for p in ensemble.align().pairs.tolist()}
    assert len(same) >= 0.95 * len(ensemble.align().pairs)
    assert parallel.timings_["wall_seconds"] > 0 and len(parallel.timings_["member_seconds"]) == 2


@pytest.mark.parametrize("n_jobs", [0, 1.5, True, "2"])
def test_bad_n_jobs_is_refused(n_jobs):
    with pytest.raises(ValueError, match="n_jobs"):
        ba.MADEnsemble(n_jobs=n_jobs)._check_params()


SMALL = {"num_inducing": 10, "max_iter": 120}  # max_iter: MAD's engine_options


def test_the_registry_and_the_command_line_run_the_pool_by_name(pooled, tmp_path, capsys):
    from bayesalign import cli, compare
    from bayesalign.io import write_view
    from bayesalign.registry import COMPARE_METHODS, run_method

    problem, ensemble = pooled
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the short fits stop at max_iter
        result = run_method("mad-ensemble", problem, seed=0, options={"latent_dims": (2, 4), "scalings": ("centred",),
                                                                      "member_options": SMALL})
    assert isinstance(result.model, ba.MADEnsemble)
    # its embedding: the pool's compared coordinates of the first two views, every member's shared dimensions
    shared = sum(result.model.posteriors().info["member_shared_dims"])
    assert {v: m.shape for v, m in result.embedding.means.items()} == {"Y1": (100, shared), "Y2": (100, shared)}
    assert [m.engine_options for m in result.model.estimators_] == [{"max_iter": 120}] * 2
    # the same members as the fixture's (built from MAD keywords there): the same alignment
    np.testing.assert_array_equal(result.alignments[("Y1", "Y2")].pairs, ensemble.align().pairs)
    scores = compare.evaluate_method_result(result, problem)
    assert scores["foscttm"] < 0.02 and scores["accuracy"] > 0.8 and np.isfinite(scores["ece"])
    assert "mad-ensemble" not in COMPARE_METHODS  # four fits: asked for by name
    with pytest.raises(ValueError, match="latent_dims"):
        run_method("mad-ensemble", problem, latent_dim=5)
    with pytest.raises(ValueError, match=r"member_options cannot set \['seed'\]"):
        ba.MADEnsemble(member_options={"seed": 1}).fit(problem)
    # the command line: the pool aligns two files; an embedding or one latent dimension is refused before any fit
    a, b = problem.views["Y1"], problem.views["Y2"]
    write_view(tmp_path / "a.csv", a)
    write_view(tmp_path / "b.csv", b)
    pairs = problem.anchors_between("Y1", "Y2").pairs
    (tmp_path / "pairs.csv").write_text("a,b\n" + "".join(f"{i},{j}\n" for i, j in pairs))
    base = ["align", tmp_path / "a.csv", tmp_path / "b.csv", "--anchors", tmp_path / "pairs.csv", "--method",
            "mad-ensemble", "--out", tmp_path / "m.csv"]
    for extra, message in ((["--embedding", tmp_path / "e.npz"], "gives no latent coordinates"),
                           (["--latent-dim", 3], "--set latent_dims")):
        assert cli.main([str(x) for x in base + extra]) == 2
        assert message in capsys.readouterr().err
    options = ["--set", "latent_dims=2,4", "--set", "scalings=centred", "--set", f"member_options={SMALL!r}",
               "--plots", tmp_path / "figures"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main([str(x) for x in base + options]) == 0, capsys.readouterr().err
    assert (tmp_path / "m.csv").exists() and not (tmp_path / "e.npz").exists()
    # the pooled coordinates and the cost; no bound
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == ["cost_a_b.png", "latent_a_b.png"]


def test_device_and_member_options_reach_every_member():
    members = ba.MADEnsemble(latent_dims=(2, 3), scalings="centred", device="cpu", member_options={
        "num_inducing": 7, "max_iter": 5, "engine_options": {"tol": 1e-3}})._members()
    assert [(m.latent_dim, m.device, m.num_inducing) for m in members] == [(2, "cpu", 7), (3, "cpu", 7)]
    assert members[0].engine_options == {"tol": 1e-3, "max_iter": 5}  # what MAD does not take goes to its MRD
    assert ba.MADEnsemble(estimators=[ba.MAD(latent_dim=2)], device="cpu")._members()[0].device == "cpu"
    with pytest.raises(ValueError, match="member_options and scalings set the default members"):
        ba.MADEnsemble(estimators=[ba.MAD()], member_options={"num_inducing": 5})._members()


def test_the_default_members_are_each_latent_dim_on_each_scaling():
    """One MAD per latent dimension on the centred views, then the same on the standardised ones; the ensemble's
    seed and the members' options reach every one of them."""
    default = ba.MAD()
    # both scalings (the default): every member once on the centred views and once on the standardised ones, in
    # that order
    assert [(m.latent_dim, m.standardize) for m in ba.MADEnsemble()._members()] == [
        (10, False), (20, False), (10, True), (20, True)]
    both = ba.MADEnsemble(latent_dims=(2, 3), scalings="centred, standardised", seed=3,
                          member_options={"max_iter": 7})  # a comma list as the CLI gives it
    assert [(m.latent_dim, m.standardize, m.num_inducing, m.seed) for m in both._members()] == [
        (2, False, default.num_inducing, 3), (3, False, default.num_inducing, 3),
        (2, True, default.num_inducing, 3), (3, True, default.num_inducing, 3)]
    assert all(m.engine_options == {"max_iter": 7} for m in both._members())
    assert ba.mad.ensemble._describe(both._members()[3]) == "latent_dim 3, standardised"
    assert ba.mad.ensemble._describe(both._members()[0]) == "latent_dim 2"
    for bad in ((), ("centred", "centred"), ("scaled",)):
        with pytest.raises(ValueError, match="scalings must name one or both"):
            ba.MADEnsemble(scalings=bad)._check_params()
    with pytest.raises(ValueError, match=r"member_options cannot set \['standardize'\]"):
        ba.MADEnsemble(member_options={"standardize": True})._members()
    for scalings in (("standardised",), "centred"):
        with pytest.raises(ValueError, match="scalings set the default members"):
            ba.MADEnsemble(estimators=[ba.MAD()], scalings=scalings)._members()
    assert len(ba.MADEnsemble(estimators=[ba.MAD()], scalings="standardised, centred")._members()) == 1


def _self_trained(pooled, rise):
    """A pool of the fixture's members, self-trained for one round, the anchors' score after the round forced to the
    score before it plus ``rise`` (so that no CPU's round-off decides the verdict)."""
    problem, ensemble = pooled
    pool = ba.MADEnsemble.from_fitted(ensemble.estimators_)
    calls, first = [], []

    def scored(anchor_pool, cost, views):  # the rows scored: those of the pool less its anchor pairs
        calls.append((len(anchor_pool.mean_a) - len(anchor_pool.true_a),
                      len(anchor_pool.mean_b) - len(anchor_pool.true_b)))
        first.append(anchor_foscttm(anchor_pool, cost, views))
        return first[0] if len(calls) == 1 else first[0] + rise

    before = pool.align(include_discovered=False, temperature="posterior")
    C = pool.cost_matrix()[2]
    with warnings.catch_warnings(), pytest.MonkeyPatch.context() as patch:
        warnings.simplefilter("ignore", ConvergenceWarning)  # the refits' short budget (120 evaluations)
        patch.setattr(self_training, "anchor_foscttm", scored)
        pool.self_train(confidence_threshold=0.9, max_rounds=1)
    return pool, before, C, calls


def test_the_ensemble_self_trains_the_pools_confident_pairs_in_every_member(pooled, tmp_path):
    problem, ensemble = pooled
    pool, before, C, calls = _self_trained(pooled, rise=0.0)  # a tie keeps the round
    entry = pool.self_training_history_[0]
    # the pool's confident mutual pairs: probability at least 0.9 at T = 1 and nearest to each other under the
    # pooled cost
    confident = before.probabilities >= 0.9
    mutual = ba.matching.mutual_nearest(C)[np.searchsorted(before.candidates_a, before.index_a),
                                           np.searchsorted(before.candidates_b, before.index_b)]
    expected = set(zip(before.index_a[confident & mutual].tolist(), before.index_b[confident & mutual].tolist()))
    assert entry["kept"] is True and entry["added"] == len(expected) >= 20
    assert entry["correct"] >= 0.95 * entry["added"] and len(entry["elbo"]) == 2
    assert calls == [(80, 80)] * 2  # before and after the round, among the rows unaligned before it
    assert entry["judge_pairs"] == "held_out"  # every member is an all-rows fit: its anchors held out of it
    for member in pool.estimators_:  # every member tied the same pairs and was refitted
        found = member.discovered_[("Y1", "Y2")]
        assert set(zip(found["index_a"].tolist(), found["index_b"].tolist())) == expected
        assert len(member.anchors_) == 20 + len(expected)
    assert all(m.discovered_ == {} for m in ensemble.estimators_)  # the fitted members given are not modified
    al = pool.align()
    assert al.info["n_discovered"] == len(expected) and len(al) == 80
    # the refits on another CPU may move a row or two of the 80
    before_accuracy = ba.metrics.evaluate(ensemble.align(), problem)["accuracy"]
    assert ba.metrics.evaluate(al, problem)["accuracy"] >= before_accuracy - 2 / 80
    # members that discovered the same pairs pool again; the history and the alignment survive a save and a load
    assert np.array_equal(ba.MADEnsemble.from_fitted(pool.estimators_).align().pairs, al.pairs)
    ba.mad.save(pool, tmp_path / "trained.npz")
    loaded = ba.mad.load(tmp_path / "trained.npz")
    assert loaded.self_training_history_ == json.loads(json.dumps(pool.self_training_history_))
    assert np.array_equal(loaded.align().pairs, al.pairs)
    # members that discovered different pairs match different rows: refused
    with pytest.raises(ValueError, match="member 1 discovered other pairs"):
        ba.MADEnsemble.from_fitted([pool.estimators_[0], ensemble.estimators_[1]])


def test_an_ensemble_self_training_round_the_anchors_judge_worse_is_undone(pooled):
    problem, ensemble = pooled
    pool, before, _, calls = _self_trained(pooled, rise=1.0)
    entry = pool.self_training_history_[0]
    assert entry["added"] >= 20 and entry["kept"] is False
    assert calls == [(80, 80)] * 2
    # the members before the round, as they were (the round refitted copies)
    assert all(p is q and q.discovered_ == {} for p, q in zip(pool.estimators_, ensemble.estimators_))
    assert "n_discovered" not in pool.align().info
    assert np.array_equal(pool.align().pairs, ensemble.align().pairs)


def test_the_anchors_are_held_out_of_the_members_in_worker_processes_as_here(pooled):
    # the judge's held-out pairs (MAD.anchor_posteriors(held_out=True): four continuations of 12 evaluations per
    # member) placed in two loky workers, as one after the other here. The workers may sum in another order (their
    # own thread count), which a dozen L-BFGS-B steps amplify little: 1e-3 of the latent spread (identical on the
    # 2-core machine)
    problem, ensemble = pooled
    key = ("Y1", "Y2", True)
    here = [_forget(m).anchor_posteriors("Y1", "Y2", held_out=True) for m in ensemble.estimators_]
    pool = ba.MADEnsemble.from_fitted([_forget(m) for m in ensemble.estimators_])
    pool.n_jobs = 2
    dispatched, each_member = [], pool._each_member

    def recorded(function, todo, arguments):  # which work went to the workers
        dispatched.append((function.__name__, len(todo)))
        return each_member(function, todo, arguments)

    pool._each_member = recorded
    held_out = pool.anchor_pool("Y1", "Y2", held_out=True)
    assert dispatched == [("_calibrated_member", 2), ("_held_out_member", 2)]
    for member, expected in zip(pool.estimators_, here):
        placed = member._anchor_cache[key]
        assert len(placed) == 4 and placed[0].shape == expected[0].shape == (20, len(member.shared_dims("Y1", "Y2")))
        for got, want in zip(placed, expected):
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * float(np.ptp(expected[0])))
    # what the judge scores is then read from the members' caches: the same pool as one after the other
    score = anchor_foscttm(held_out, pool.cost, ("Y1", "Y2"))
    serial = ba.MADEnsemble.from_fitted([_forget(m) for m in ensemble.estimators_])
    # FOSCTTM of 20 pairs among 100 rows, both directions: one rank of one pair moves it by 1 / (2 * 20 * 99)
    expected = anchor_foscttm(serial.anchor_pool("Y1", "Y2", held_out=True), serial.cost, ("Y1", "Y2"))
    assert abs(score - expected) <= 4 / (2 * 20 * 99)


def test_the_members_temperatures_are_fitted_in_worker_processes_as_here(pooled):
    # the members' temperatures fitted on the anchors (each a scalar search over Sinkhorn solves) in two loky workers,
    # and what each computed on the way (re-inferred anchors, misfit) kept in its member: the same as one after the
    # other here, up to the workers' own summation order (re-inference is a few L-BFGS steps per row: 1e-6 relative)
    problem, ensemble = pooled
    key = ("Y1", "Y2", "likelihood")
    here = [_forget(m) for m in ensemble.estimators_]
    expected = [member.calibrate_temperature("Y1", "Y2") for member in here]
    pool = ba.MADEnsemble.from_fitted([_forget(m) for m in here])
    pool.n_jobs = 2
    dispatched, each_member = [], pool._each_member

    def recorded(function, todo, arguments):  # which work went to the workers
        dispatched.append((function.__name__, len(todo)))
        return each_member(function, todo, arguments)

    pool._each_member = recorded
    got = pool.member_temperatures("Y1", "Y2")
    assert dispatched == [("_calibrated_member", 2)]
    np.testing.assert_allclose(got, expected, rtol=1e-4)
    reinferred = ("Y1", "Y2", False)
    for member, serial in zip(pool.estimators_, here):
        assert member.calibration_[key]["temperature"] == pytest.approx(serial.calibration_[key]["temperature"],
                                                                         rel=1e-4)
        assert reinferred in member._anchor_cache and key in member._calibration_potentials
        assert member.misfit_[("Y1", "Y2")] is not None
        np.testing.assert_allclose(member._anchor_cache[reinferred][0], serial._anchor_cache[reinferred][0],
                                   rtol=1e-4, atol=1e-6)
    # the pool aligns with them as one after the other here
    serial_pool = ba.MADEnsemble.from_fitted(here)
    assert pool.calibrate_temperature("Y1", "Y2") == pytest.approx(serial_pool.calibrate_temperature("Y1", "Y2"),
                                                                   rel=1e-3)


def _reported_in_a_worker(member, record):
    """A worker's result whose recorded warning names nothing: the pool names the member when it issues it."""
    return member.latent_dim, 0.0, [(RuntimeWarning, "said in a worker")]


def test_a_workers_warning_names_the_member_by_its_place_in_the_pool(pooled):
    # work sent for some members only (those whose temperature or held-out anchors are not cached yet), or in
    # another order, still names each by its index in the pool
    _, ensemble = pooled
    pool = ba.MADEnsemble.from_fitted([copy.deepcopy(m) for m in ensemble.estimators_])
    pool.n_jobs = 2
    members = pool.estimators_[::-1]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = pool._each_member(_reported_in_a_worker, members, [()] * len(members))
    assert [dim for dim, _, _ in out] == [m.latent_dim for m in members]
    said = [str(w.message) for w in record if "said in a worker" in str(w.message)]
    last = len(members) - 1
    assert said == [f"member {last - k} (latent_dim {m.latent_dim}): said in a worker" for k, m in enumerate(members)]


def test_ensemble_self_training_in_worker_processes_and_its_errors(pooled):
    problem, ensemble = pooled
    serial, *_ = _self_trained(pooled, rise=0.0)
    parallel_pool = ba.MADEnsemble.from_fitted(ensemble.estimators_)
    parallel_pool.n_jobs = 2
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        parallel_pool.self_train(max_rounds=1)
    # each member's refit stops at its 120 evaluations: said in the worker, issued here naming the member, at the
    # line of the user's code that self-trained (not inside the package)
    stopped = [w for w in record if "member 1 (latent_dim 4): MAD: the fit kept stopped" in str(w.message)]
    assert stopped and all(w.filename == __file__ for w in stopped)
    # the same pairs tied as one after the other here (the E-step is the same pool; the refits ran elsewhere)
    assert parallel_pool.self_training_history_[0]["added"] == serial.self_training_history_[0]["added"]
    views = problem.views
    three = ba.AlignmentProblem(ba.Views({"Y1": views["Y1"], "Y2": views["Y2"], "Y3": views["Y1"][:, :3]}),
                                anchors=[ba.Correspondence(("Y1", "Y2"), np.arange(20), np.arange(20))])
    with pytest.raises(ValueError, match="two views; this problem has 3"):  # what self_train checks first
        check_self_training(three, 0.9, 1)
    with pytest.raises(ValueError, match="confidence_threshold"):
        ba.MADEnsemble.from_fitted(ensemble.estimators_).self_train(confidence_threshold=1.5)
    with pytest.raises(ValueError, match="confidence_threshold"):
        ba.MADEnsemble.from_fitted(ensemble.estimators_).self_train(confidence_threshold=0)
    with pytest.raises(ValueError, match="max_rounds"):
        ba.MADEnsemble.from_fitted(ensemble.estimators_).self_train(max_rounds=-1)
