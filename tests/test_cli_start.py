"""The command line starts light (issue #44): ``isotropy --help`` and every ``isotropy COMMAND --help`` import neither
scikit-learn nor torch (nor the other heavy libraries a command loads when it runs). A module check in a fresh
interpreter, not a clock: BENCHMARKS records the time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("sklearn", "torch", "scipy", "transformers", "sentence_transformers", "faiss", "pandas", "model2vec", "distributed")
SRC = Path(__file__).resolve().parents[1] / "src"

_PROBE = """
import json, sys
from isotropy.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


def _heavy_imports(*args: str) -> list[str]:
    import os

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_the_top_level_help_imports_no_heavy_library():
    assert _heavy_imports("--help") == []
    assert _heavy_imports("--version") == []


def test_every_command_help_imports_no_heavy_library():
    import click
    import typer

    from isotropy.cli import app

    root = typer.main.get_command(app)
    ctx = click.Context(root)
    # each top-level command and group, and the commands of the groups that are not built lazily
    paths = []
    for name in root.list_commands(ctx):
        paths.append([name])
        group = root.get_command(ctx, name)
        if hasattr(group, "list_commands"):
            eager = getattr(group, "commands", {})
            paths += [
                [name, sub]
                for sub in group.list_commands(click.Context(group))
                if sub in eager and sub not in getattr(group, "lazy", {})
            ]
    assert ["fit"] in paths and ["index", "build"] in paths and ["calibrate"] in paths
    # one interpreter per path would cost a second each: run them all in one, checking after each
    script = (
        "import json, sys\n"
        "from isotropy.cli import main\n"
        f"heavy = {HEAVY!r}\n"
        "seen = {}\n"
        f"for path in {paths!r}:\n"
        "    try:\n"
        "        main([*path, '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "    seen[' '.join(path)] = sorted(m for m in heavy if m in sys.modules)\n"
        "print(json.dumps(seen))\n"
    )
    import os

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen and all(mods == [] for mods in seen.values()), {k: v for k, v in seen.items() if v}


def test_a_lazy_fit_command_is_listed_with_the_help_it_has_when_built():
    import click
    import typer

    from isotropy.cli import app
    from isotropy.cli.root import LazyGroup

    fit = typer.main.get_command(app).get_command(click.Context(typer.main.get_command(app)), "fit")
    assert isinstance(fit, LazyGroup) and {"center", "abtt", "soft-0.5"} <= set(fit.lazy)
    ctx = click.Context(fit)
    for name in fit.lazy:
        summary = fit.lazy[name][1]()
        built = fit.get_command(ctx, name)
        assert built.help == summary and any(p.name == "vectors" for p in built.params)


def test_the_top_level_listing_is_the_one_the_built_commands_give(capsys, monkeypatch):
    """``isotropy --help`` lists each command from a line kept in :mod:`isotropy.cli.app` without building it; the
    listing must be the same text as the one typer prints once every command is built."""
    import click
    import typer

    from isotropy.cli import app
    from isotropy.cli.app import COMMANDS, GROUPS
    from isotropy.cli.root import LazyRoot

    root = typer.main.get_command(app)
    assert isinstance(root, LazyRoot) and not root.commands  # nothing built yet
    monkeypatch.setenv("COLUMNS", "200")

    def help_text() -> str:
        try:
            root.main(["--help"], prog_name="isotropy", standalone_mode=False)
        except SystemExit:  # pragma: no cover - standalone_mode=False returns
            pass
        return capsys.readouterr().out

    lazy = help_text()
    assert not root.commands  # listing built nothing
    ctx = click.Context(root)
    for name in [*COMMANDS, *GROUPS]:
        built = root.get_command(ctx, name)
        assert built.name == name and (built.params or hasattr(built, "list_commands"))
    assert set(root.commands) == set(COMMANDS) | set(GROUPS)
    eager = help_text()
    assert lazy == eager and all(name in lazy for name in COMMANDS)


def test_the_top_level_help_imports_no_command_module():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _PROBE.replace("{heavy}", "{heavy!r}").format(
                heavy=(
                    "isotropy.cli.calibrate_command",
                    "isotropy.cli.index_commands",
                    "isotropy.cli.fit_commands",
                    "isotropy.cli.distill_command",
                )
            ),
            "--help",
        ],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(SRC)},
        timeout=120,
        check=True,
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
