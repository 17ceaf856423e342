"""
A toy with a known answer
=========================

The toy of the MAD paper (Damianou, Lawrence & Ek 2016, section 4): two 20-dimensional views of one
latent curve, with a shared and a private part each. The unaligned rows of the second view are
shuffled, so the true partner of every row is known and the matching can be scored. MAD is fitted at
tiny settings (4 latent dimensions, 10 inducing inputs, 100 L-BFGS evaluations) so that the example
runs in seconds.
"""

import bayesalign as ba

problem = ba.datasets.mad_toy("linear_shared", seed=0, n_anchors=10).shuffle_unaligned(seed=0)
print(problem)

# %%
# Fit MAD on every row (10 anchor pairs, 90 unaligned rows per view), then match the unaligned
# rows by the Hungarian method on the likelihood cost.

mad = ba.MAD(latent_dim=4, num_inducing=10, seed=0, engine_options={"max_iter": 100}).fit(problem)
alignment = mad.align(matcher="hungarian", cost="likelihood")
print("shared latent dimensions:", mad.embedding_.shared_dims)
print(f"accuracy (fraction of rows matched to their true partner): "
      f"{ba.metrics.matching_accuracy(alignment, problem):.3f}")
print(f"Kendall-tau distance (0 perfect, 0.5 random): {ba.metrics.kendall_tau_distance(alignment, problem):.3f}")

# %%
# The ARD relevance of each view's latent dimensions: a dimension both views use is shared, one
# only a single view uses is private to it.

relevance = ba.plot.plot_relevance(mad)
