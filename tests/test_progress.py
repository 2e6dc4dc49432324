"""Long commands' progress moves batch by batch, in sentences, so the bar shows a rate and the time left."""

from __future__ import annotations

import numpy as np

from isotropy._progress import ProgressBar


class Recorder(ProgressBar):
    """A ProgressBar that records every bar's total, unit and steps (and draws nothing)."""

    made: list[Recorder] = []

    def __init__(self, total, show, label, min_total=4, unit=None):
        super().__init__(total, False, label, min_total, unit)
        self.total, self.unit, self.label, self.steps = total, unit, label, []
        Recorder.made.append(self)

    def advance(self, steps=1, description=None):
        self.steps.append(steps)


def test_calibrate_progress_moves_per_batch_with_a_rate(tiny_model_dir, tmp_path, monkeypatch):
    from isotropy.calibration import fit, run_calibration
    from isotropy.encoders import encoder

    rng = np.random.default_rng(0)
    words = "cat dog river market piano rain bridge city".split()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(rng.choice(words, size=5)) for _ in range(300)) + "\n")
    Recorder.made.clear()
    monkeypatch.setattr(fit, "ProgressBar", Recorder)
    monkeypatch.setattr(encoder, "ProgressBar", Recorder)
    run_calibration(corpus, tmp_path / "m", model=tiny_model_dir, max_length=32, batch_size=16, show_progress=True)
    (bar,) = [b for b in Recorder.made if b.label == "encoding" and b.total == 300]
    assert bar.unit == "sentences" and sum(bar.steps) == 300
    assert len(bar.steps) >= 300 // 16 and max(bar.steps) <= 16  # one step per batch of 16, not per chunk of 4,096
