"""examples/train_transformer_lm.py trains on the device and shows its progress."""
import importlib.util
import pathlib
import re

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "examples" / "train_transformer_lm.py"
LINE = re.compile(r"step +(\d+)/(\d+) \| loss (\d+\.\d+) \| +(\d+\.\d+) steps/s \| lr \S+ \| compilations (\d+)")


def test_example_trains_with_progress_display(capsys):
    spec = importlib.util.spec_from_file_location("train_transformer_lm", SCRIPT)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.main(["--steps", "16", "--log-every", "4", "--d-model", "16", "--heads", "2",
                  "--layers", "1", "--seq-len", "12", "--batch-size", "8", "--lr", "1e-2",
                  "--generate", "3"])
    out = capsys.readouterr().out
    rows = [tuple(float(v) for v in m.groups()) for m in LINE.finditer(out)]
    assert [int(r[0]) for r in rows] == [1, 4, 8, 12, 16], out
    losses, compiles = [r[2] for r in rows], [int(r[4]) for r in rows]
    assert losses[-1] < 0.85 * losses[0], out
    assert compiles[1] == compiles[-1] > 0, f"recompiled while training: {out}"
    assert all(r[3] > 0 for r in rows)
    assert "sample: " in out
