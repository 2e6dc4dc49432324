"""Where ``isotropy demo``'s sentences and scored pairs come from, in this order.

1. The STS Benchmark on disk: ``data`` (Python), ``$ISOTROPY_DATA`` or ``../shared/data`` (from the
   working folder), as ``sts-train.csv`` + ``sts-test.csv``.
2. The STS Benchmark from the Hugging Face hub (:data:`HUB_REPO`), when it is cached under the
   isotropy cache or a hub answers: fetched once, then read from the cache (offline too).
3. Neither: no scored pairs. The demo says so and how to get them, and shows only what needs no
   scores (the cone before and after calibration) on real English sentences: the docstrings of
   Python's own standard library, which every installation ships. Nothing is judged and nothing is
   recommended then; generated template sentences are never presented as evidence (their
   "scores" rank the templates' slots, not meaning, and calibration looked harmful on them).

In the scored cases the calibration reads the train split's sentences, never their scores, and
the scores of the test split are what it is judged on.
"""

from __future__ import annotations

import ast
import functools
import os
import random
import re
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "DemoData",
    "demo_data",
    "find_stsb",
    "fetch_stsb_from_hub",
    "stdlib_sentences",
    "make_demo_data",
    "HUB_REPO",
    "STSB_LICENCE",
    "DEMO_PAIRS",
]

# The demo's budget is a minute on 2 cores, and the transformer's encoding is its cost: at most this many
# scored pairs (spread evenly over the test split).
DEMO_PAIRS = 500

HUB_REPO = "sentence-transformers/stsb"  # the STS Benchmark as parquet: sentence1, sentence2, score (0-1)
HUB_FILES = {"train": "data/train-00000-of-00001.parquet", "test": "data/test-00000-of-00001.parquet"}
STSB_LICENCE = (
    "STS Benchmark (Cer et al., SemEval 2017; http://ixa2.si.ehu.eus/stswiki): scores under CC BY-SA 4.0, "
    "sentences under their sources' licences (its readme lists them)"
)
HOW_TO_GET = (
    "to get them: put the STS Benchmark's sts-train.csv and sts-test.csv (http://ixa2.si.ehu.eus/stswiki) in a "
    "folder and run `ISOTROPY_DATA=that-folder isotropy demo`, or run the demo once where the Hugging Face hub "
    f"is reachable (it fetches {HUB_REPO} and keeps it in the isotropy cache)"
)


@dataclass
class DemoData:
    corpus: list[str]
    pairs: list[tuple[str, str, float]]
    source: str = "a generated corpus"
    licence: str = ""
    held_out: list[str] = field(default_factory=list)  # unscored: sentences the calibration did not see
    missing: str | None = None  # unscored: why no scored pairs were found, and how to get them


# --------------------------------------------------------------------------- 1. on disk


def find_stsb(data: str | os.PathLike | None = None) -> Path | None:
    """The STS Benchmark folder: under ``data``, ``$ISOTROPY_DATA`` or ``../shared/data`` (from the working folder)."""
    for root in (data, os.environ.get("ISOTROPY_DATA"), Path.cwd().parent / "shared" / "data"):
        if not root:
            continue
        for folder in (Path(root), Path(root) / "sts" / "STSBenchmark", Path(root) / "STSBenchmark"):
            if (folder / "sts-train.csv").is_file() and (folder / "sts-test.csv").is_file():
                return folder
    return None


def _scored(train: list[tuple[str, str, float]], test: list[tuple[str, str, float]], source: str) -> DemoData:
    corpus = list(dict.fromkeys(s for s1, s2, _ in train for s in (s1, s2)))
    step = max(1, len(test) // DEMO_PAIRS)
    pairs = test[::step][:DEMO_PAIRS]
    return DemoData(
        corpus,
        pairs,
        f"{source}: the train split's sentences as the corpus, {len(pairs)} test pairs as the judge",
        STSB_LICENCE,
    )


def _from_folder(folder: Path) -> DemoData:
    from ..evaluation.tasks import load_stsb

    task = load_stsb(folder)
    split = lambda name: [(p.s1, p.s2, p.score) for p in task.splits[name]]  # noqa: E731
    return _scored(split("train"), split("test"), f"STS Benchmark ({folder})")


# --------------------------------------------------------------------------- 2. the hub


def _hub_cache() -> Path:
    from ..encoders.cache import default_cache_dir

    return default_cache_dir() / "hub"


def fetch_stsb_from_hub(cache: str | os.PathLike | None = None) -> tuple[dict[str, list[tuple[str, str, float]]] | None, str]:
    """The STS Benchmark's train and test pairs from :data:`HUB_REPO`: from the cache when it holds them (no network),
    else downloaded when a hub answers. Returns ``(splits, where)``, or ``(None, why not)``."""
    from huggingface_hub import hf_hub_download

    from .._hub import hub_offline_reason

    cache = Path(cache) if cache is not None else _hub_cache()

    def get(local: bool) -> dict[str, Path]:
        return {
            split: Path(hf_hub_download(HUB_REPO, name, repo_type="dataset", cache_dir=cache, local_files_only=local))
            for split, name in HUB_FILES.items()
        }

    try:
        files = get(local=True)
    except Exception:  # not cached (huggingface_hub's own errors: LocalEntryNotFoundError and kin)
        reason = hub_offline_reason()
        if reason is not None:
            return None, f"the Hugging Face hub cannot be reached ({reason})"
        try:
            files = get(local=False)
        except Exception as exc:  # any failure of a download is the same answer: no scored pairs from the hub
            return None, f"fetching {HUB_REPO} from the Hugging Face hub failed ({type(exc).__name__}: {str(exc)[:200]})"
    try:
        return {
            split: _read_parquet(path) for split, path in files.items()
        }, f"{HUB_REPO} on the Hugging Face hub, cached in {cache}"
    except Exception as exc:  # a damaged cached file: say so, never half-read it
        return None, f"the cached copy of {HUB_REPO} in {cache} cannot be read ({type(exc).__name__}: {str(exc)[:200]})"


def _read_parquet(path: Path) -> list[tuple[str, str, float]]:
    import pyarrow.parquet as pq  # model2vec and the embedded GloVe need it already

    table = pq.read_table(path, columns=["sentence1", "sentence2", "score"]).to_pydict()
    rows = list(zip(table["sentence1"], table["sentence2"], table["score"]))
    if not rows:
        raise ValueError(f"{path.name} holds no pairs")
    return [(str(a), str(b), float(s)) for a, b, s in rows]


# --------------------------------------------------------------------------- 3. no scores


_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_PLAIN = re.compile(r"^[A-Z][A-Za-z ,;:'()-]+[.!?]$")  # prose, not code: letters and punctuation only


@functools.lru_cache(maxsize=4)  # a parse of ~170 files: once per process
def _stdlib_sentences(limit: int, seed: int) -> tuple[str, ...]:
    return tuple(stdlib_sentences(limit, seed))


def stdlib_sentences(limit: int = 3000, seed: int = 0) -> list[str]:
    """Up to ``limit`` distinct English sentences (6-30 words, no code) from the docstrings of Python's
    standard library (its top-level modules): real text that every Python installation ships."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    found: dict[str, None] = {}
    for path in sorted(lib.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node) or ""
            for para in re.split(r"\n\s*\n", doc):
                for s in _SPLIT.split(" ".join(para.split())):
                    if _PLAIN.match(s) and 6 <= len(s.split()) <= 30:
                        found[s] = None
    sentences = list(found)
    random.Random(seed).shuffle(sentences)
    return sentences[:limit]


def _unscored(why: str, seed: int) -> DemoData:
    sentences = list(_stdlib_sentences(3000, seed))
    cut = (2 * len(sentences)) // 3
    return DemoData(
        sentences[:cut],
        [],
        f"{len(sentences)} sentences from the docstrings of Python's standard library (no scored pairs)",
        "the Python Software Foundation License (Python's own)",
        held_out=sentences[cut:],
        missing=f"no scored pairs were found (none in $ISOTROPY_DATA or ../shared/data; {why}); {HOW_TO_GET}",
    )


def demo_data(data: str | os.PathLike | None = None, seed: int = 0) -> DemoData:
    """The demo's data: the STS Benchmark on disk, else from the hub (or its cache), else unscored real sentences."""
    folder = find_stsb(data)
    if folder is not None:
        return _from_folder(folder)
    splits, where = fetch_stsb_from_hub()
    if splits is not None:
        return _scored(splits["train"], splits["test"], f"STS Benchmark ({where})")
    return _unscored(where, seed)


# --------------------------------------------------------------------------- templates (tests, examples)

SUBJECTS = [
    ["A man", "A guy"],
    ["A woman", "A lady"],
    ["A child", "A kid"],
    ["The chef", "The cook"],
    ["A dog", "A puppy"],
    ["Two friends", "A pair of friends"],
    ["An old farmer", "An elderly farmer"],
    ["A student", "A young pupil"],
]
ACTIONS = [
    ["is playing the guitar", "plays the guitar"],
    ["is cooking dinner", "is preparing a meal"],
    ["is reading a book", "reads a novel"],
    ["is riding a bicycle", "rides a bike"],
    ["is painting a picture", "paints a picture"],
    ["is eating an apple", "eats an apple"],
    ["is running", "is jogging"],
    ["is sleeping", "is taking a nap"],
    ["is swimming", "swims"],
    ["is talking on the phone", "is making a phone call"],
]
PLACES = [
    ["in the park", "at the park"],
    ["in the kitchen", "inside the kitchen"],
    ["on the beach", "by the sea"],
    ["in the garden", "out in the garden"],
    ["at the station", "at the train station"],
    ["in a small room", "in a tiny room"],
    ["near the river", "by the river"],
]


def _sentence(rng: random.Random, s: int, a: int, p: int) -> str:
    return f"{rng.choice(SUBJECTS[s])} {rng.choice(ACTIONS[a])} {rng.choice(PLACES[p])}."


def make_demo_data(n_corpus: int = 600, n_pairs: int = 400, seed: int = 0) -> DemoData:
    """A generated corpus and pairs (gold = number of shared slots, 0-3): a small, fixed text for tests and
    examples. The demo no longer uses it: its pairs rank template slots, not meaning."""
    rng = random.Random(seed)
    slots = lambda: (rng.randrange(len(SUBJECTS)), rng.randrange(len(ACTIONS)), rng.randrange(len(PLACES)))  # noqa: E731
    unique: dict[str, None] = {}
    while len(unique) < n_corpus:  # distinct sentences (the templates allow thousands)
        unique[_sentence(rng, *slots())] = None
    corpus = list(unique)
    pairs = []
    for i in range(n_pairs):
        first = slots()
        shared = i % 4  # balanced gold scores 0..3
        keep = set(rng.sample(range(3), shared))
        second = tuple(
            first[j] if j in keep else rng.choice([v for v in range(n) if v != first[j]])
            for j, n in enumerate((len(SUBJECTS), len(ACTIONS), len(PLACES)))
        )
        pairs.append((_sentence(rng, *first), _sentence(rng, *second), float(shared)))
    return DemoData(corpus, pairs, "a generated corpus (templates; gold = shared slots 0-3)")
