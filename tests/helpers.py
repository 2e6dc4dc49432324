"""Small helpers shared by the tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parents[1]


def data_dir() -> Path:
    import os

    return Path(os.environ.get("ISOTROPY_DATA", ROOT.parent / "shared" / "data")).resolve()


def spearman_cos(a: np.ndarray, b: np.ndarray, gold: np.ndarray) -> float:
    """Spearman x 100 between the row-wise cosine of ``a`` and ``b`` and the gold scores."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(spearmanr(cos, gold).statistic * 100)


def run_cli(args, input=None) -> tuple[int, str, str]:
    """Run the CLI in-process through ``isotropy.cli.main`` (so its error handling is exercised).

    Returns ``(exit status, stdout, stderr)``; ``input`` (str or bytes) is standard input.
    """
    import contextlib
    import io
    import sys

    from isotropy.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if input is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(input if isinstance(input, bytes) else input.encode()))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([str(a) for a in args])
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.stdin = old_stdin
    return code, out.getvalue(), err.getvalue()


def snapshot(root: Path) -> dict[str, tuple]:
    """Every file and folder under ``root`` (hidden ones included): kind, mode and content digest."""
    import hashlib
    import os

    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            if p.is_dir() and not p.is_symlink():
                state[rel] = ("dir", st.st_mode)
            else:
                state[rel] = ("file", st.st_mode, hashlib.sha256(p.read_bytes()).hexdigest())
    return state


def tiny_bert(folder: Path, *, mask_token: bool = True, layers: int = 2, heads: int = 4) -> Path:
    """A tiny random BERT (32 dims) saved at ``folder``: with the default model's tokenizer, or, with
    ``mask_token=False``, with a small WordPiece tokenizer that has no mask token (its own vocabulary)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel, PreTrainedTokenizerFast

    from isotropy.encoders import default_model_path

    if mask_token:
        tokenizer = AutoTokenizer.from_pretrained(str(default_model_path()))
    else:
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

        words = "a the cat dog sat on mat runs sentence number talks about and . , ! ?".split()
        vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *words])}
        tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
        )
        tokenizer = PreTrainedTokenizerFast(
            tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
        )
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=64,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def assert_same_geometry(Z1: np.ndarray, Z2: np.ndarray, rtol: float = 1e-5) -> None:
    """Two calibrations of the same vectors agree on what the maths fixes: every inner product.

    A whitening kernel is unique only up to a rotation of its output (the eigenvectors of
    near-equal eigenvalues differ between BLAS builds and thread counts), so comparing kernels or
    transformed vectors element by element fails on other machines; the Gram matrix does not
    depend on the rotation. The tolerance is relative to the Gram matrix's largest entry.
    """
    Z1, Z2 = np.asarray(Z1, np.float64), np.asarray(Z2, np.float64)
    assert Z1.shape == Z2.shape, (Z1.shape, Z2.shape)
    G1, G2 = Z1 @ Z1.T, Z2 @ Z2.T
    scale = max(np.abs(G1).max(), np.abs(G2).max(), np.finfo(np.float64).tiny)
    worst = np.abs(G1 - G2).max() / scale
    assert worst <= rtol, f"inner products differ by {worst:.2e} of their scale (allowed {rtol:.0e})"


# A small vocabulary and five sentences of different lengths (a one-word one and a long one): the toy text
# of the calibration tests on real and tiny models.
WORDS = "cat dog market river guitar rain city child music storm bread train field house doctor".split()
SENTENCES = [
    "A man is playing a guitar.",
    "Two dogs run through a field of tall green grass near the river, barking at the birds overhead.",
    "hi",
    "Stocks fell sharply on Monday after the report.",
    "The cat sat on the mat.",
]


def word_corpus(n: int, seed: int = 0) -> list[str]:
    """``n`` seeded lines of 2 to 11 words of :data:`WORDS`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 12)))) for _ in range(n)]


# A tiny static vocabulary: the model2vec and StaticEmbedding folders of the hostile-input tests (#31).
STATIC_WORDS = ["the", ",", ".", "cat", "sat", "on", "mat", "a", "dog", "ran"]


def tiny_static_vectors(dim: int = 6) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((len(STATIC_WORDS), dim)).astype(np.float32)


def tiny_model2vec(folder: Path) -> Path:
    """A model2vec folder of :data:`STATIC_WORDS` (+ ``[UNK]``, a zero row), saved by model2vec itself."""
    from model2vec import StaticModel

    from isotropy.encoders.static.table import UNK, word_tokenizer

    vectors = tiny_static_vectors()
    tok = word_tokenizer([*STATIC_WORDS, UNK], UNK, True)()
    StaticModel(np.vstack([vectors, np.zeros((1, vectors.shape[1]), np.float32)]), tok, normalize=False).save_pretrained(folder)
    return folder


def tiny_st_static(folder: Path, *head) -> Path:
    """A sentence-transformers folder: ``StaticEmbedding`` of :data:`STATIC_WORDS` (+ ``[UNK]``), then ``head``'s modules."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    from isotropy.encoders.static.table import UNK, word_tokenizer

    vectors = tiny_static_vectors()
    tok = word_tokenizer([*STATIC_WORDS, UNK], UNK, True)()
    emb = StaticEmbedding(tok, embedding_weights=np.vstack([vectors, np.ones((1, vectors.shape[1]), np.float32)]))
    SentenceTransformer(modules=[emb, *head], device="cpu").save(str(folder))
    return folder
