"""Hostile input to the static loaders and their parse cache (issue #31): what each case now gets.

The one-line refusals run through the command line in tests/test_bad_input.py (rows under "static tables");
these tests check the cases whose answer is a result: the right vectors, a rebuilt cache entry, a note.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest

from helpers import STATIC_WORDS, tiny_st_static, tiny_static_vectors
from isotropy.encoders.static import load_table, parse_cache
from isotropy.encoders.static.parsecache import cache_dir
from isotropy.errors import IsotropyError

VECS = tiny_static_vectors()


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ISOTROPY_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ISOTROPY_NO_VERIFY", raising=False)


def _rows(words=STATIC_WORDS, vectors=VECS) -> str:
    return "".join(w + " " + " ".join(f"{x:.6f}" for x in v) + "\n" for w, v in zip(words, vectors))


def _glove(path: Path, text: str, prefix: bytes = b"") -> Path:
    path.write_bytes(prefix + text.encode("utf-8"))
    return path


def test_a_byte_order_mark_is_skipped(tmp_path):  # W1
    plain = load_table(_glove(tmp_path / "plain.txt", _rows()))
    bom = load_table(_glove(tmp_path / "bom.txt", _rows(), b"\xef\xbb\xbf"))
    assert bom.tokens[0] == "the" and bom.tokens == plain.tokens
    np.testing.assert_array_equal(bom.vectors, plain.vectors)
    header = load_table(_glove(tmp_path / "bom.vec", f"{len(STATIC_WORDS)} 6\n" + _rows(), b"\xef\xbb\xbf"))
    np.testing.assert_array_equal(header.vectors, plain.vectors)


def test_a_binary_header_must_count_the_words(tmp_path):  # W2
    body = b"".join(w.encode() + b" " + struct.pack("<6f", *v) + b"\n" for w, v in zip(STATIC_WORDS, VECS))
    n = len(STATIC_WORDS)
    for said in (n - 2, n + 3):
        path = tmp_path / f"said{said}.bin"
        path.write_bytes(f"{said} 6\n".encode() + body)
        with pytest.raises(IsotropyError, match=rf"{path} line 1: the header says {said} words, the file holds (at most )?{n}\b"):
            load_table(path)
    (tmp_path / "huge.bin").write_bytes(b"99999999999 6\n" + body)  # refused before 10^11 rows are allocated
    with pytest.raises(IsotropyError, match="header says 99999999999 words, the file holds at most"):
        load_table(tmp_path / "huge.bin")
    (tmp_path / "ok.bin").write_bytes(f"{n} 6\n".encode() + body)
    np.testing.assert_allclose(load_table(tmp_path / "ok.bin").vectors[:n], VECS)


def test_an_edit_with_the_modification_time_put_back_is_parsed_again(tmp_path):  # W3
    path = _glove(tmp_path / "g.txt", _rows())
    first = load_table(path)
    st = path.stat()
    edited = VECS.copy()
    edited[4, 2] = -edited[4, 2] if abs(edited[4, 2]) >= 1 else 0.5 * np.sign(edited[4, 2])  # same printed width
    text = _rows(vectors=edited)
    assert len(text) == st.st_size and text != path.read_text()
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # touch -r: size and mtime as before
    again = load_table(path)
    np.testing.assert_allclose(again.vectors[4], edited[4], atol=1e-6)
    assert again.digest() != first.digest()
    copy = tmp_path / "copy"  # the same bytes under a new inode and status time (cp -p): served from the entry
    copy.mkdir()
    moved = copy / "g.txt"
    moved.write_bytes(path.read_bytes())
    os.replace(moved, path)
    assert isinstance(load_table(path).vectors, np.memmap)
    (entry,) = cache_dir().iterdir()  # its new inode recorded: the next load need not hash it
    assert json.loads((entry / "meta.json").read_text())["source"]["inode"] == path.stat().st_ino


def test_a_damaged_cache_entry_is_parsed_again_never_served(tmp_path, capsys):  # W4
    path = _glove(tmp_path / "g.txt", _rows())
    load_table(path)
    (entry,) = cache_dir().iterdir()
    npy = entry / "vectors.npy"
    data = bytearray(npy.read_bytes())
    data[-30] ^= 0x40  # a flipped bit in a vector: the shape is right
    npy.write_bytes(bytes(data))
    table = load_table(path)
    np.testing.assert_allclose(table.vectors[: len(VECS)], VECS, atol=1e-6)
    err = capsys.readouterr().err
    assert f"the parse cache entry {entry} is damaged" in err and len(err.strip().splitlines()) == 1
    tokens = json.loads((entry / "tokens.json").read_text())
    (entry / "tokens.json").write_text(json.dumps(["THE", *tokens[1:]]))  # same length, another word
    assert load_table(path).tokens[0] == "the"
    path.unlink()
    with pytest.raises(IsotropyError, match="does not exist"):
        load_table(path)


def test_one_line_does_not_make_a_table_case_sensitive(tmp_path, capsys):  # U6
    unk = load_table(_glove(tmp_path / "unk.txt", _rows([*STATIC_WORDS[:-1], "[UNK]"])))
    assert unk.lowercase and capsys.readouterr().err == ""
    a, b = unk.pool(["The CAT sat", "the cat sat"])
    np.testing.assert_array_equal(a, b)
    paris = load_table(_glove(tmp_path / "paris.txt", _rows([*STATIC_WORDS[:-1], "Paris"])))
    assert paris.lowercase
    assert "lower-cased: only 1 of its 10 words hold capitals ('Paris')" in capsys.readouterr().err
    two = load_table(_glove(tmp_path / "two.txt", _rows(["The", "Cat", *STATIC_WORDS[2:]])))
    assert not two.lowercase and "case-sensitive: 2 of its 10 words" in capsys.readouterr().err


def test_trailing_blank_lines_and_words_with_spaces(tmp_path):  # U3, U8
    plain = load_table(_glove(tmp_path / "plain.txt", _rows()))
    blank = load_table(_glove(tmp_path / "blank.txt", _rows() + "\n \n"))
    np.testing.assert_array_equal(blank.vectors, plain.vectors)
    words = [". . .", "at name@domain.com", *STATIC_WORDS[2:]]  # GloVe 840B's kind; the first line among them
    spaced = load_table(_glove(tmp_path / "spaced.txt", _rows(words)))
    assert spaced.tokens[:2] == words[:2] and spaced.dim == 6
    np.testing.assert_array_equal(spaced.vectors, plain.vectors)
    with pytest.raises(IsotropyError, match=r"ragged\.txt line 2: 7 values where the table has 6"):
        load_table(_glove(tmp_path / "ragged.txt", _rows().replace("\n,", "\n, 0.5", 1)))  # extra numbers: ragged
    with pytest.raises(IsotropyError, match=r"middle\.txt line 3: a blank line"):
        load_table(_glove(tmp_path / "middle.txt", _rows().replace("\n", "\n\n", 2).replace("\n\n", "\n", 1)))


def test_no_cache_writes_nothing_and_cache_dir_moves_it(tmp_path, capsys):  # U16, U14
    from isotropy.encoders.cache import VectorCache

    path = _glove(tmp_path / "g.txt", _rows())
    with parse_cache(False):
        assert not isinstance(load_table(path).vectors, np.memmap)
    with parse_cache(VectorCache(enabled=False)):
        load_table(path)
    assert not (tmp_path / "cache").exists()
    with parse_cache(tmp_path / "elsewhere"):
        assert isinstance(load_table(path).vectors, np.memmap)
    assert len(list((tmp_path / "elsewhere" / "static").iterdir())) == 1 and not (tmp_path / "cache").exists()
    (tmp_path / "cache").write_text("a file where the cache folder should be")  # unwritable, even for root
    table = load_table(path)
    np.testing.assert_allclose(table.vectors[: len(VECS)], VECS, atol=1e-6)
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"warning: the parse cache {tmp_path / 'cache' / 'static'} cannot be written") and "\n" not in err


def test_a_linear_dense_after_static_embedding_is_applied(tmp_path):  # W6
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Dense, Normalize

    from isotropy import Encoder

    torch.manual_seed(0)
    folder = tiny_st_static(tmp_path / "st", Dense(6, 4, activation_function=torch.nn.Identity()), Normalize())
    text = ["The cat sat on the mat.", "a dog ran", "zzz the cat"]
    enc = Encoder(str(folder))
    ours, theirs = enc.encode(text), SentenceTransformer(str(folder), device="cpu").encode(text)
    assert ours.shape == (3, 4) and enc.dim == 4
    cos = (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)
    assert cos.min() > 1 - 1e-5


def test_eval_no_cache_and_cache_dir_reach_the_parse_cache(tmp_path):  # U16, through the command line
    from helpers import run_cli

    path = _glove(tmp_path / "g.txt", _rows())
    folder = tmp_path / "ret"
    folder.mkdir()
    (folder / "documents.txt").write_text("the cat sat\na dog ran\nthe mat\n")
    (folder / "queries.txt").write_text("cat sat\ndog\n")
    (folder / "qrels.tsv").write_text("0\t0\t1\n1\t1\t1\n")
    args = ["eval", "--retrieval", folder, "--model", path, "--method", "raw", "--no-progress"]
    code, _, err = run_cli([*args, "--no-cache"])
    assert code == 0, err
    assert not (tmp_path / "cache").exists()
    code, _, err = run_cli([*args, "--cache-dir", tmp_path / "mine"])
    assert code == 0, err
    assert len(list((tmp_path / "mine" / "static").iterdir())) == 1 and not (tmp_path / "cache").exists()
