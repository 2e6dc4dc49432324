"""All-but-the-top (Mu & Viswanath, ICLR 2018): subtract the mean, remove the top D principal directions.

``y = (x - mean) (I - U_D U_D^T)``, ``U_D`` the top ``D`` eigenvectors of the centred
covariance of the fitting vectors. ``D`` defaults to the paper's rule of thumb, about
``d / 100``: ``max(1, round(d / 100))`` (4 for 384 dimensions, 8 for 768).

**Which variant.** This is the centred variant: the projections removed are those of
the centred vector ``x - mean``. The widely copied reference code (lgalke's
``all_but_the_top`` gist, lines 16-23) computes the directions from the centred vectors
too (``PCA(n_components=D).fit(v_tilde)``), but removes the projections of the
UNcentred vectors: ``v_tilde - (v @ u.T @ u)``. The two differ by the same constant
vector ``U_D U_D^T mean`` subtracted from every row: identical after any later
centring, not identical for a raw cosine. The centred variant is the one whose output
has zero mean and no variance along the removed directions, and with ``D = 0`` it is
exactly ``center``. (The paper's Algorithm 1 could not be checked against its text
here; the abstract says "eliminate the common mean vector and a few top dominating
directions".)
"""

from __future__ import annotations

from .removal import DirectionRemoval

__all__ = ["AllButTheTop", "default_components"]


def default_components(d: int) -> int:
    """The paper's rule of thumb for the number of removed directions: about d/100, at least 1."""
    return max(1, round(d / 100))


class AllButTheTop(DirectionRemoval):
    """All-but-the-top post-processing as a scikit-learn style transformer (kind ``abtt``).

    Parameters
    ----------
    n_components : int or None
        D, the number of top principal directions removed (0 <= D < d; 0 is plain centering);
        None: the paper's rule of thumb max(1, round(d / 100)).

    Learned state: ``mean_``, ``components_`` (D x d, the removed directions), ``n_components_``,
    ``eigenvalues_`` (of the centred covariance, ddof 0), ``removed_fraction_`` (share of
    the variance removed), ``kernel_`` (d x d), ``moments_``.
    """

    kind = "abtt"
    label = "abtt"
    centered = True
    matrix_name = "covariance"

    def __init__(self, n_components: int | None = None):
        self.n_components = n_components

    def _default_components(self, d: int) -> int:
        return default_components(d)

    def describe(self) -> str:
        d = self.moments_.dim
        return (
            f"abtt (all-but-the-top): centred, top {self.n_components_} of {d} directions removed "
            f"({100 * self.removed_fraction_:.1f}% of the variance), fitted on {self.moments_.n} rows"
        )
