"""SIF's common-component removal (Arora, Liang & Ma, ICLR 2017): project out the top singular vector(s).

``y = x (I - U U^T)``, ``U`` the first ``n_components`` right singular vectors of the
UNcentred sentence matrix ``X``: no mean is subtracted, neither before the SVD nor from
the output. That is what SIF's code does (PrincetonML/SIF ``src/SIF_embedding.py``
``compute_pc`` lines 19-28, docstring "DO NOT MAKE THE DATA ZERO MEAN!":
``TruncatedSVD(n_components=npc)`` fitted on the raw matrix; ``remove_pc`` lines 30-42:
``X - X.dot(pc.T).dot(pc)``; ``npc = 1``, ``examples/sif_embedding.py`` line 9; see
``/work/notes/research-14.md`` section 4). The right singular vectors of ``X`` are the
eigenvectors of ``X^T X / n = scatter / n + mean mean^T``, so the fit needs only
:class:`~isotropy.transforms.moments.Moments` (it streams, merges and fits from moments).

SIF fits the component per file and per side of its STS pairs; here it is fitted on
whatever corpus the caller gives (``isotropy eval`` uses its ``--fit-on`` setting).
"""

from __future__ import annotations

from .removal import DirectionRemoval

__all__ = ["CommonComponentRemoval"]


class CommonComponentRemoval(DirectionRemoval):
    """Common-component removal as a scikit-learn style transformer (kind ``common-component``).

    Parameters
    ----------
    n_components : int
        Number of top singular vectors of the uncentred sentence matrix removed
        (SIF's npc; the paper's and its code's default is 1; 0 <= n_components < d).

    Learned state: ``components_`` (n_components x d, unit length), ``n_components_``,
    ``eigenvalues_`` (of ``X^T X / n``, i.e. squared singular values / n), ``removed_fraction_``
    (share of the uncentred energy removed), ``kernel_``, ``moments_``.
    """

    kind = "common-component"
    label = "common-component"
    centered = False
    matrix_name = "uncentred second moment"

    def __init__(self, n_components: int = 1):
        self.n_components = n_components

    def _default_components(self, d: int) -> int:
        return 1

    def describe(self) -> str:
        d = self.moments_.dim
        return (
            f"common-component removal (SIF): {self.n_components_} of {d} directions of the uncentred vectors removed "
            f"({100 * self.removed_fraction_:.1f}% of their energy), no centring, fitted on {self.moments_.n} rows"
        )
