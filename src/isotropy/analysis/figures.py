"""The report's figures, drawn from the numbers of ``report.json`` alone (layer 5).

Every ``plot_*`` function takes the ``"sentence"`` or ``"word"`` part of a report and
returns a matplotlib ``Figure`` on an Agg canvas (no pyplot state, no display needed).
:data:`FIGURES` maps each PNG file name of a report folder to the part it draws, the
function and its caption.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "plot_cosine_histograms",
    "plot_spectrum",
    "plot_projection",
    "plot_token_projection",
    "plot_token_norms",
    "FIGURES",
]


def _new_figure(width: float, height: float):
    # Figure + Agg canvas directly: no pyplot global state, no display, thread-safe.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _colors(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def plot_cosine_histograms(sentence: Mapping[str, Any]):
    """Histograms of the random-pair cosines, one per representation (overlaid)."""
    fig = _new_figure(7, 4.2)
    ax = fig.add_subplot()
    reps = sentence["representations"]
    for (name, rep), color in zip(reps.items(), _colors(len(reps))):
        h = rep["cosine_histogram"]
        edges = np.asarray(h["edges"])
        counts = np.asarray(h["counts"], dtype=np.float64)
        density = counts / max(counts.sum(), 1) / np.diff(edges)
        ax.stairs(density, edges, label=f"{name} (mean {rep['average_cosine']['mean']:.3f})", color=color, linewidth=1.6)
        ax.axvline(rep["average_cosine"]["mean"], color=color, linestyle="--", linewidth=1)
    ax.set_xlabel("cosine similarity of a random sentence pair")
    ax.set_ylabel("density")
    ax.set_xlim(-1, 1)
    ax.set_title(f"Cosine similarity of {sentence['n_pairs']} random sentence pairs")
    ax.legend(loc="upper left", fontsize="small")
    return fig


def plot_spectrum(sentence: Mapping[str, Any]):
    """Covariance eigenvalue spectrum (left) and cumulative explained variance (right)."""
    fig = _new_figure(10, 4.2)
    ax1, ax2 = fig.subplots(1, 2)
    reps = sentence["representations"]
    for (name, rep), color in zip(reps.items(), _colors(len(reps))):
        ev = np.asarray(rep["eigenvalues"], dtype=np.float64)
        total = ev.sum() if ev.sum() > 0 else 1.0
        share = ev / total
        idx = np.arange(1, len(ev) + 1)
        # the numerical rank (numpy.linalg.matrix_rank's tolerance): eigenvalues below it are rounding, not variance,
        # and plotting them (1e-20 after a whitening drops directions) would squash the rest of the curve
        rank = share > share.max() * len(ev) * np.finfo(np.float64).eps
        ax1.plot(idx[rank], share[rank], color=color, label=f"{name} (numerical rank {int(rank.sum())} of {len(ev)})")
        d90 = rep["dims_for_variance"]["0.9"]
        ax2.plot(idx, np.cumsum(share), color=color, label=f"{name}: 90% in {d90} dims")
        if d90:
            ax2.plot([d90], [np.cumsum(share)[d90 - 1]], "o", color=color)
    ax1.set_yscale("log")  # floored at the smallest eigenvalue above the numerical rank (the lines drawn)
    ax1.set_xlabel("principal direction (sorted by variance)")
    ax1.set_ylabel("share of total variance")
    ax1.set_title("Covariance eigenvalue spectrum")
    ax1.legend(fontsize="small")
    ax2.axhline(0.9, color="grey", linestyle=":", linewidth=1)
    ax2.set_xlabel("number of principal directions")
    ax2.set_ylabel("cumulative explained variance")
    ax2.set_ylim(0, 1.02)
    ax2.set_title("Explained variance curve")
    ax2.legend(fontsize="small", loc="lower right")
    return fig


def plot_projection(sentence: Mapping[str, Any]):
    """2-D projection of the unit-length sentence vectors, one panel per representation."""
    reps = sentence["representations"]
    n = len(reps)
    fig = _new_figure(4.2 * n, 4.4)
    axes = np.atleast_1d(fig.subplots(1, n))
    theta = np.linspace(0, 2 * np.pi, 200)
    for ax, (name, rep), color in zip(axes, reps.items(), _colors(n)):
        p = rep["projection"]
        ax.scatter(p["x"], p["y"], s=4, alpha=0.5, color=color, linewidths=0)
        ax.plot(np.cos(theta), np.sin(theta), color="lightgrey", linewidth=0.8)
        ax.plot([0], [0], "k+", markersize=10)
        ax.set_xlim(-1.05, 1.05)
        ax.set_ylim(-1.05, 1.05)
        ax.set_aspect("equal")
        ax.set_xlabel("1st singular direction")
        ax.set_ylabel("2nd singular direction")
        ax.set_title(f"{name}\n(avg cosine {rep['average_cosine']['mean']:.3f})", fontsize="medium")
    fig.suptitle("Unit-length sentence vectors projected to 2-D (origin +, unit circle grey)")
    return fig


def plot_token_projection(word: Mapping[str, Any]):
    """2-D projection of token embeddings coloured by frequency rank."""
    from matplotlib.colors import LogNorm

    fig = _new_figure(6.4, 5.2)
    ax = fig.add_subplot()
    p = word["projection"]
    order = np.argsort(p["rank"])[::-1]  # frequent tokens drawn last, on top
    rank = np.asarray(p["rank"], dtype=np.float64)[order] + 1
    sc = ax.scatter(
        np.asarray(p["x"])[order],
        np.asarray(p["y"])[order],
        c=rank,
        s=5,
        cmap="viridis_r",
        norm=LogNorm(vmin=1, vmax=max(rank.max(), 2)),
        linewidths=0,
    )
    fig.colorbar(sc, ax=ax, label="frequency rank in the corpus (1 = most frequent)")
    ax.plot([0], [0], "k+", markersize=10)
    ax.set_xlabel("1st singular direction")
    ax.set_ylabel("2nd singular direction")
    ax.set_title(f"Token embeddings ({len(rank)} of {word['ranked_tokens']}), coloured by frequency rank")
    return fig


def plot_token_norms(word: Mapping[str, Any]):
    """l2 norm of token embeddings against frequency rank, bucket means drawn as segments."""
    fig = _new_figure(7, 4.2)
    ax = fig.add_subplot()
    p = word["projection"]
    ax.scatter(np.asarray(p["rank"]) + 1, p["norm"], s=4, alpha=0.4, color="tab:blue", linewidths=0, label="token (sample)")
    n = word["ranked_tokens"]
    for b in word["buckets"]:
        if b["mean_norm"] is None:
            continue
        lo, hi = b["start"] + 1, (b["stop"] if b["stop"] is not None else n)
        ax.hlines(b["mean_norm"], lo, min(hi, n), color="tab:red", linewidth=2.5)
        ax.axvline(lo, color="grey", linestyle=":", linewidth=0.8)
    ax.plot([], [], color="tab:red", linewidth=2.5, label="bucket mean")
    ax.set_xscale("log")
    ax.set_xlabel("frequency rank in the corpus (1 = most frequent)")
    ax.set_ylabel("l2 norm of the token embedding")
    ax.set_title("Token embedding norm by frequency rank")
    ax.legend(fontsize="small")
    return fig


# file name -> (part of the report it draws, function, caption)
FIGURES: dict[str, tuple[str, Any, str]] = {
    "cosine_histogram.png": ("sentence", plot_cosine_histograms, "Cosine similarity of random sentence pairs"),
    "spectrum.png": ("sentence", plot_spectrum, "Covariance spectrum and explained variance"),
    "projection.png": ("sentence", plot_projection, "2-D projection of the sentence vectors"),
    "token_projection.png": ("word", plot_token_projection, "2-D projection of the token embeddings by frequency rank"),
    "token_norms.png": ("word", plot_token_norms, "Token embedding norm by frequency rank"),
}
