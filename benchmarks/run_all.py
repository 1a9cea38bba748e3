"""Runs every benchmark, each in its own process, and writes the table into
docs/reference/benchmarks.md
(the part between the markers; the notes around it are kept)."""
import datetime
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
TABLE = HERE.parent / "docs" / "reference" / "benchmarks.md"
SCRIPTS = ["mlp.py", "transformer.py", "cnn.py", "tracing.py", "overlap.py", "spmd_fsdp.py", "eager.py",
           "loops.py"]
BEGIN, END = "<!-- table:begin -->", "<!-- table:end -->"
TARGETS = {"ours/jax": 1.15, "ours/eager": 1.0, "first_ratio": 1.3, "peak_ratio": 1.3, "per_op_us": 7.0,
           "compiled/jax": 1.1, "mark_step_ms": 0.2, "step/max": 1.2}


def run():
    out = pathlib.Path(tempfile.mkdtemp()) / "results.jsonl"
    for script in SCRIPTS:
        subprocess.run([sys.executable, script], cwd=HERE, check=True,
                       env=dict(os.environ, BENCH_OUT=str(out)))
    return [json.loads(line) for line in out.read_text().splitlines()]


def fmt(key, value, ours=True):
    """`value` as the table shows it; marked against its target where it is ours (not
    upstream torch_xla's figures, nor a ratio to them)."""
    text = f"{value:.3g}" if isinstance(value, float) else str(value)
    target = TARGETS.get(key) if ours else None
    if target is not None and isinstance(value, float):
        text += " ✓" if value <= target else f" ✗ (target ≤ {target})"
    return text


def table(results):
    lines = [f"Measured {datetime.date.today()} on this machine ({os.cpu_count()} cores), "
             "`python benchmarks/run_all.py`.", ""]
    for r in results:
        name = r.pop("name")
        lines.append(f"**{name}**")
        lines.append("")
        lines.append("| " + " | ".join(r) + " |")
        lines.append("|" + "---|" * len(r))
        ours = not name.endswith("upstream")
        lines.append("| " + " | ".join(fmt(k, v, ours) for k, v in r.items()) + " |")
        lines.append("")
    return "\n".join(lines)


def main():
    text = TABLE.read_text() if TABLE.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    body = table(run())
    TABLE.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}")
    print(body)


if __name__ == "__main__":
    main()
