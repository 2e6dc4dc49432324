"""The sentence-transformers twin of a static folder is written without sentence-transformers (isotropy.integrations.
st_static): the same files, byte for byte, as sentence-transformers' own ``save``, and a static calibrate imports
neither torch nor sentence-transformers (a module check in a fresh interpreter, not a clock)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import ROOT


def _tokenizer(words: list[str], lowercase: bool):
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if lowercase:
        tok.normalizer = normalizers.Lowercase()
    tok.enable_truncation(16)
    return tok


def _files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("lowercase", [False, True])
def test_the_twin_is_what_sentence_transformers_saves_byte_for_byte(tmp_path, normalize, lowercase):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    from isotropy.integrations.st_static import write_static_st_folder

    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
    rows = np.random.default_rng(3).normal(size=(len(words) + 1, 6)).astype(np.float32)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    write_static_st_folder(ours, _tokenizer(words, lowercase), rows, normalize)
    modules = [StaticEmbedding(_tokenizer(words, lowercase), embedding_weights=rows)] + ([Normalize()] if normalize else [])
    SentenceTransformer(modules=modules, device="cpu").save(str(theirs), create_model_card=False)
    assert _files(ours) == _files(theirs)
    text = ["The cat sat on the mat", "a dog ran", "zebra"]
    loaded = SentenceTransformer(str(ours), device="cpu")
    got = loaded.encode(text)
    # StaticEmbedding: the plain mean of the rows of the ids the tokenizer gives (the unknown token's row included)
    want = np.stack([rows[_tokenizer(words, lowercase).encode(t).ids].mean(0) for t in text])
    if normalize:
        want = want / np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert [type(m).__name__ for m in loaded] == ["StaticEmbedding"] + (["Normalize"] if normalize else [])


def test_a_static_calibrate_imports_neither_torch_nor_sentence_transformers(tmp_path):
    from helpers import tiny_model2vec, word_corpus

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(word_corpus(200)) + "\n", encoding="utf-8")
    base = tiny_model2vec(tmp_path / "base")  # the model's size does not matter here: what the command imports does
    probe = (
        "import json, sys\n"
        "from isotropy.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print(json.dumps(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules)))\n"
    )
    out = tmp_path / "m"
    args = ["calibrate", str(corpus), "-o", str(out), "--model", str(base), "--method", "whitening", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
    modules = json.loads((out / "sentence-transformers" / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[-1] for m in modules] == ["StaticEmbedding"]
