"""One method grammar and one typed calibration request (issue #44): ``isotropy.transforms.methods`` and
``isotropy.calibration.request``."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import run_cli
from isotropy.calibration.request import CalibrationRequest
from isotropy.errors import IsotropyError
from isotropy.transforms.methods import (
    PARAMETER_CONSTRAINTS,
    TOKEN_METHODS,
    Interval,
    Method,
    check_value,
    parse_method,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "isotropy"


def _corpus(tmp_path: Path) -> Path:
    words = "the a cat dog sat on mat ran far near house tree river big small red blue green old new".split()
    lines = [" ".join(words[(i * k) % len(words)] for k in range(1, 8)) for i in range(300)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- the grammar


def test_one_grammar_reads_every_form():
    assert parse_method("whitening-256") == Method("whitening-256", "whitening", "sentence", (("n_components", 256),))
    assert parse_method("Soft-0.5").power == 0.5 and parse_method("soft-0.5").name == "soft-0.5"
    assert parse_method("soft-whitening-0.3").power == 0.3  # the old spelling, kept as named
    assert parse_method("whitening-shrunk").options == {"shrinkage": "auto"}
    assert parse_method("abtt-8").n_components == 8 and parse_method("abtt").n_components is None
    assert parse_method("none").kind == "raw" and parse_method("auto").kind == "auto"
    for name, (kind, weights) in TOKEN_METHODS.items():
        m = parse_method(name)
        assert (m.kind, m.level, m.token_weights) == (kind, "token", weights)
    assert parse_method("center").level == "sentence" and parse_method("center").token_weights is None
    for bad in ("pca", "whitening-0", "soft-2", "flow-3", "center-2", 3, None):
        with pytest.raises(IsotropyError, match="unknown method"):
            parse_method(bad)


def test_the_constraint_table_names_what_each_transform_takes():
    """The table is written by hand (no scikit-learn at the command line's start): it must agree with the classes."""
    from isotropy.transforms import transform_class
    from isotropy.transforms.token_whitening import ZipfianWhitening

    for kind, table in PARAMETER_CONSTRAINTS.items():
        if kind in ("raw", "auto", "flow"):
            continue
        cls = ZipfianWhitening if kind == "zipfian-whitening" else transform_class(kind)
        assert set(table) <= set(cls._get_param_names()), kind


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(-5, 5000), st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.text(max_size=4)))
def test_the_constraint_table_rejects_what_it_should(value):
    """n_components of a whitening: an integer >= 1 or None; power: a finite number in [0, 1]; shrinkage: that, a
    numeric string of it, or 'auto'. Anything else is one line naming the option."""
    table = PARAMETER_CONSTRAINTS["whitening"]
    cases = {
        "n_components": isinstance(value, int) and not isinstance(value, bool) and value >= 1,
        "power": not isinstance(value, (bool, str)) and value == value and abs(value) != float("inf") and 0 <= value <= 1,
    }
    for name, ok in cases.items():
        if ok:
            check_value(name, value, table[name])
        else:
            with pytest.raises(IsotropyError, match=f"^--{name.replace('_', '-')} ") as err:
                check_value(name, value, table[name])
            assert "\n" not in str(err.value)
    assert (
        Interval(float, 0, 1, strings=True).is_satisfied_by("0.25")
        and check_value("shrinkage", "AUTO", table["shrinkage"]) is None
    )


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"method": "bogus"}, "'bogus' is not a transform; the transforms are"),
        ({"method": "raw"}, "method 'raw' calibrates nothing"),
        ({"method": "auto", "n_components": 8}, "--n-components does not apply to method 'auto'"),
        ({"method": "center", "power": 0.5}, "--power does not apply to method 'center'"),
        ({"method": "whitening", "candidates": "raw,center"}, "--candidates applies to --method auto only"),
        ({"method": "whitening", "task": "search"}, "--for applies to --method auto only"),
        ({"method": "whitening", "evidence": True}, "--evidence applies to --method auto only"),
        ({"method": "whitening", "pooling": "auto"}, "--pooling auto applies to --method auto only"),
        ({"method": "whitening", "power": 2.0}, "--power 2.0: must be a number in"),
        ({"method": "whitening", "n_components": 0}, "--n-components 0: must be an integer >= 1"),
        ({"method": "soft-0.5", "power": 0.3}, "soft-0.5 fixes power=0.5"),
        ({"method": "auto", "candidates": "raw,whitenning"}, "unknown candidate 'whitenning'"),
        ({"method": "auto", "task": "chat"}, "--for 'chat': must be one of similarity, search"),
        ({"method": "auto", "engine": "dask"}, "--method auto compares candidates on a sample encoded here"),
        ({"quantize": "int4"}, "--quantize 'int4' is not a quantization"),
        ({"engine": "ray"}, "unknown engine 'ray'"),
        ({"min_gain": 1.0}, "--min-gain 1.0: needs a finite number of points and --eval DATA"),
        ({"n_components": 4, "bogus": 1}, "unknown calibrate option 'bogus'"),
    ],
)
def test_bad_values_are_one_line_naming_the_option(options, says):
    with pytest.raises(IsotropyError) as err:
        CalibrationRequest.from_options(**options)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_cli_says_a_bad_value_in_one_line(tmp_path):
    corpus = _corpus(tmp_path)
    code, _, err = run_cli(["calibrate", str(corpus), "-o", str(tmp_path / "out"), "--method", "center", "--power", "0.5"])
    assert code == 2 and err.startswith("error: --power does not apply to method 'center'") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- the door: CLI and Python alike


def test_the_cli_and_python_build_the_same_request(tmp_path, monkeypatch):
    import isotropy.calibration as calibration

    seen = {}

    def fake(corpus, output, request=None, progress=None, **options):
        seen.update(request=request, progress=progress, options=options)
        raise IsotropyError("stop here")

    monkeypatch.setattr(calibration, "run_calibration", fake)
    corpus = _corpus(tmp_path)
    args = ["calibrate", str(corpus), "-o", str(tmp_path / "out"), "--model", "glove-6b-50d", "--method", "soft-whitening-0.5"]
    code, _, err = run_cli([*args, "--n-components", "20", "--shrinkage", "auto", "--batch-size", "8", "--no-progress"])
    assert code == 2 and "stop here" in err
    assert "note: method soft-whitening-0.5 is deprecated and will be removed; say soft-0.5" in err
    py = CalibrationRequest.from_options(
        model="glove-6b-50d", method="soft-whitening-0.5", n_components=20, shrinkage="auto", batch_size=8
    )
    assert py.notes == ("method soft-whitening-0.5 is deprecated and will be removed; say soft-0.5",)
    assert seen["request"] == py and seen["progress"] is False and seen["options"] == {}
    assert py.method == Method("soft-0.5", "whitening", "sentence", (("n_components", 20), ("power", 0.5), ("shrinkage", "auto")))
    auto = ["--method", "auto", "--pooling", "auto", "--candidates", "raw,center", "--for", "search"]
    code, _, err = run_cli([*args[:6], *auto])
    assert code == 2 and "stop here" in err
    same = CalibrationRequest.from_options(
        model="glove-6b-50d", method="auto", pooling="auto", candidates="raw,center", task="search"
    )
    assert seen["request"] == same and same.auto_pooling and same.encoder_kwargs()["pooling"] is None


def test_the_keyword_call_keeps_working_and_a_request_is_the_same_call(tmp_path):
    from isotropy.calibration import run_calibration

    corpus = _corpus(tmp_path)
    a = run_calibration(corpus, tmp_path / "a", model="glove-6b-50d", method="whitening", shrinkage="auto", show_progress=False)
    request = CalibrationRequest.from_options(model="glove-6b-50d", method="whitening", shrinkage="auto")
    b = run_calibration(corpus, tmp_path / "b", request, False)
    assert a.info["request"] == b.info["request"] == request.to_dict()
    assert a.info["params"] == b.info["params"] and a.info["dim_out"] == b.info["dim_out"]
    with pytest.raises(IsotropyError, match="not both"):
        run_calibration(corpus, tmp_path / "c", request, model="glove-6b-50d")


def test_the_request_round_trips_through_isotropy_json(tmp_path):
    corpus = _corpus(tmp_path)
    code, _, err = run_cli(
        [
            "calibrate",
            str(corpus),
            "-o",
            str(tmp_path / "out"),
            "--model",
            "glove-6b-50d",
            "--method",
            "whitening-20",
            "--shrinkage",
            "0.1",
            "--no-progress",
        ]  # fmt: skip
    )
    assert code == 0, err
    saved = json.loads((tmp_path / "out" / "isotropy.json").read_text(encoding="utf-8"))["calibration"]["request"]
    back = CalibrationRequest.from_dict(saved)
    assert back == CalibrationRequest.from_options(model="glove-6b-50d", method="whitening-20", shrinkage="0.1")
    assert back.to_dict() == saved and json.loads(json.dumps(saved)) == saved
    assert str(tmp_path) not in json.dumps(saved)  # a local corpus, model or dev file is recorded by name only


# ----------------------------------------------------------------------------- one reader of the raw string


def _calls(path: Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in names:
                found.append(name)
    return found


def test_only_the_request_module_reads_calibrates_method_string():
    """Calibrate's ``--method`` string is parsed in calibration/request.py and nowhere else in calibration/ or the
    calibrate command; nothing there asks again whether it is auto or token-level from a string."""
    parsers = {"parse_method", "resolve_method", "is_token_method", "token_estimator", "check_auto_pooling", "canonical_method"}
    files = [*sorted((SRC / "calibration").glob("*.py")), SRC / "cli" / "calibrate_command.py"]
    for path in files:
        calls = _calls(path, parsers)
        if path.name == "request.py":
            assert calls.count("parse_method") == 2 and set(calls) == {"parse_method"}  # the door, and its default
        elif path.parent.name == "calibration" and path.name in ("fit.py", "pooling_fit.py", "token_fit.py"):
            # the deprecated wrappers build a request through the door: no parsing of their own
            assert not ({"parse_method", "is_token_method"} & set(calls)), path
        else:
            assert calls == [], (path, calls)
        text = path.read_text(encoding="utf-8")
        assert 'method == "auto"' not in text and 'method != "auto"' not in text, path
    # the token table is asked for its level in one place of the pipeline
    pipeline = (SRC / "calibration" / "pipeline.py").read_text(encoding="utf-8")
    assert pipeline.count(".level") == 1 and "TOKEN_METHODS" not in pipeline


def test_the_grammar_imports_no_scikit_learn():
    import subprocess
    import sys

    code = "import isotropy.transforms.methods; print('sklearn' in sys.modules)"
    env_src = str(SRC.parent)
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {env_src!r}); {code}"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_the_old_names_stay_importable_and_go_through_the_one_grammar():
    from isotropy.calibration.fit import resolve_method
    from isotropy.calibration.pooling_fit import check_auto_pooling
    from isotropy.calibration.token_fit import TOKEN_METHODS as OLD_TABLE
    from isotropy.calibration.token_fit import is_token_method, token_estimator
    from isotropy.evaluation import parse_method as eval_parse
    from isotropy.selection import parse_candidate

    assert eval_parse is parse_method and OLD_TABLE is TOKEN_METHODS
    with pytest.warns(DeprecationWarning):
        assert resolve_method("whitening-8").n_components == 8
    with pytest.warns(DeprecationWarning):
        assert is_token_method("zipfian-whitening") and not is_token_method("whitening")
    with pytest.warns(DeprecationWarning):
        assert type(token_estimator("zipfian-whitening", shrinkage="auto")).__name__ == "ZipfianWhitening"
    with pytest.warns(DeprecationWarning):
        assert check_auto_pooling("auto", "auto") and not check_auto_pooling("cls", "whitening")
    c = parse_candidate("soft-whitening-0.5")
    assert (c.name, c.kind, c.params) == ("soft-whitening-0.5", "whitening", parse_method("soft-whitening-0.5").params)
    assert parse_candidate("whitening-shrunk").params == (("shrinkage", "auto"),) and parse_candidate("none").kind is None
    for bad in ("auto", "zipfian-whitening", "flow"):
        with pytest.raises(IsotropyError, match="candidate"):
            parse_candidate(bad)
