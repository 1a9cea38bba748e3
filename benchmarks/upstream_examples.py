"""Upstream torch_xla's own example training scripts (examples/, unmodified) run with this
package and with upstream torch_xla in one run, their steps timed in blocks alternating
between the two, so that a shared machine weighs on both alike.

    python benchmarks/upstream_examples.py [EXAMPLE ...] [--src DIR | --git-dir GIT --tag TAG]
        [--upstream-python PY] [--ours-python PY] [--warmup N] [--blocks N] [--steps N]

The examples come from an upstream checkout (`--src`) or from `git archive TAG examples` of a
mirror. Each side runs each script as its own process (`example_runner.py`: this repository
on the path for ours; from a temporary folder, upstream's venv alone for upstream's),
PJRT_DEVICE=CPU, at a CPU size: the decoder-only model at hidden size 256, intermediate
size 1024 (its other sizes and the batch of 16 × 512 tokens as upstream sets them), through
the arguments the script takes or else DecoderOnlyConfig's defaults; the ResNet scripts'
fake batches divided by 16 (they need torchvision on both sides, else they are skipped).
Prints per example the best block's seconds per step of each side, `ours/upstream` (the
median ratio of neighbouring blocks), the compilations during the timed blocks, and the
step's FLOPs (XLA's cost analysis of the programs ours runs in a step) as a fraction of
the machine's float32 matmul peak (`common.matmul_peak`, measured first in the same run),
for each side's step time. XLA's cost analysis counts a loop's body once: the scan
example's figure holds one layer of its eight.
"""
import argparse
import dataclasses
import json
import os
import pathlib
import select
import subprocess
import sys
import tempfile

from common import matmul_peak, report
from upstream_tests import environment

HERE = pathlib.Path(__file__).resolve().parent
RUNNER = HERE / "example_runner.py"
DECODER = {"hidden_size": 256, "intermediate_size": 1024}
SIZE_ARGS = ["--hidden-size", "256", "--intermediate-size", "1024"]


@dataclasses.dataclass
class Example:
    script: str
    argv: tuple = ()
    devices: int = 1
    batch_divisor: int = 1  # the ResNet scripts: their batch is fixed in the trainer
    torchvision: bool = False


EXAMPLES = {
    "base": Example("train_decoder_only_base.py", tuple(SIZE_ARGS)),
    "eager": Example("eager/train_decoder_only_eager.py"),
    "eager_with_compile": Example("eager/train_decoder_only_eager_with_compile.py"),
    "scan": Example("train_decoder_only_base.py",
                    ("scan.decoder_with_scan.DecoderWithScan", *SIZE_ARGS, "--num-layers", "8")),
    "fsdp_v2": Example("fsdp/train_decoder_only_fsdp_v2.py", devices=4),
    "flash_attention": Example("flash_attention/train_decoder_only_flash_attention.py"),
    "resnet_base": Example("train_resnet_base.py", batch_divisor=16, torchvision=True),
    "resnet_amp": Example("train_resnet_amp.py", batch_divisor=16, torchvision=True),
    "resnet_spmd_data_parallel": Example("data_parallel/train_resnet_spmd_data_parallel.py",
                                         devices=4, batch_divisor=16, torchvision=True),
}


class Failed(Exception):
    pass


class Side:
    """One example script running under one side's python, waiting at its loader's gate."""

    def __init__(self, side, python, examples, example, work, timeout):
        spec = {"script": str(examples / example.script), "argv": list(example.argv),
                "examples": str(examples), "config": DECODER,
                "batch_divisor": example.batch_divisor, "flops": side == "ours"}
        read, write = os.pipe()
        self.log_path = pathlib.Path(work) / f"{side}.log"
        self.side, self.timeout = side, timeout
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen([python, str(RUNNER), json.dumps(spec), str(write)],
                                         cwd=work, env=environment(side, example.devices),
                                         stdin=subprocess.PIPE, stdout=log, stderr=log,
                                         pass_fds=(write,), text=True)
        os.close(write)
        self.reports = os.fdopen(read)
        self._read()  # {"ready": true}: set up, before its first step

    def _read(self):
        ready, _, _ = select.select([self.reports], [], [], self.timeout)
        line = self.reports.readline() if ready else ""
        if not line:  # it ended (its exit status, once it has) or takes too long
            try:
                self.proc.wait(timeout=60 if ready else 0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            tail = self.log_path.read_text().strip().splitlines()[-3:]
            raise Failed(f"{self.side}: exit {self.proc.returncode}: " + (
                " | ".join(tail) if ready else f"no step in {self.timeout} s"))
        return json.loads(line)

    def run(self, steps):
        self.proc.stdin.write(f"run {steps}\n")
        self.proc.stdin.flush()
        return self._read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.close()
            self.proc.wait()


def imports_torchvision(python):
    return subprocess.run([python, "-c", "import torchvision"], capture_output=True).returncode == 0


def measure(example, examples, sides, opts):
    """Alternated blocks of the example on both sides: the figures of its report line."""
    with tempfile.TemporaryDirectory() as work:
        started, failures = {}, {}
        try:
            for side, python in sides.items():
                try:
                    started[side] = Side(side, python, examples, example, work, opts.timeout)
                except Failed as e:
                    failures[side] = str(e)
            blocks = {side: [] for side in started}
            for count, timed in [(opts.warmup, False)] + [(opts.steps, True)] * opts.blocks:
                for side in list(started):
                    try:
                        result = started[side].run(count)
                    except Failed as e:
                        failures[side] = str(e)
                        del started[side], blocks[side]
                        continue
                    if timed:
                        blocks[side].append(result)
        finally:
            for side in started.values():
                side.stop()
    return figures(blocks, failures)


def figures(blocks, failures):
    per_step = {side: [b["seconds"] / b["steps"] for b in got] for side, got in blocks.items() if got}
    out = {f"{side}_s": min(times) for side, times in per_step.items()}
    if len(per_step) == 2:
        ratios = sorted(a / b for a, b in zip(per_step["ours"], per_step["upstream"]))
        out["ours/upstream"] = ratios[len(ratios) // 2]
    for side, got in blocks.items():
        out[f"{side}_compiles"] = sum(b["compiles"] for b in got)
    flops = [b["flops"] / b["steps"] for b in blocks.get("ours", []) if b["flops"]]
    if flops:
        out["gflop_per_step"] = flops[-1] / 1e9
        for side in per_step:
            out[f"{side}_of_peak"] = flops[-1] / out[f"{side}_s"] / matmul_peak()
    out.update({f"{side}_fails": message for side, message in failures.items()})
    return out


def examples_folder(opts, work):
    if opts.src:
        return opts.src.resolve() / "examples"
    archive = subprocess.run(["git", f"--git-dir={opts.git_dir}", "archive", opts.tag, "examples"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", work], input=archive, check=True)
    return pathlib.Path(work) / "examples"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("examples", nargs="*", choices=[[], *EXAMPLES], metavar="EXAMPLE",
                        help=f"default: all of {', '.join(EXAMPLES)}")
    parser.add_argument("--src", type=pathlib.Path, help="an upstream checkout")
    parser.add_argument("--git-dir", default="/work/.mirror/pytorch+xla/repo")
    parser.add_argument("--tag", default="v2.9.0")
    parser.add_argument("--upstream-python", default="/work/upstream-venv/bin/python")
    parser.add_argument("--ours-python", default=sys.executable)
    parser.add_argument("--warmup", type=int, default=3, help="steps before the timed blocks")
    parser.add_argument("--blocks", type=int, default=3, help="timed blocks per side")
    parser.add_argument("--steps", type=int, default=3, help="steps per block")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds a block may take")
    opts = parser.parse_args(argv)
    if opts.warmup + opts.blocks * opts.steps >= 200:  # the scripts stop after 200 steps
        parser.error("at most 199 steps in all")
    sides = {"ours": opts.ours_python, "upstream": opts.upstream_python}
    peak = matmul_peak()
    print(f"matmul peak (float32 2048² jnp.dot, best of 5): {peak / 1e9:.0f} GFLOP/s; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as work:
        examples = examples_folder(opts, work)
        for name in opts.examples or EXAMPLES:
            example = EXAMPLES[name]
            if example.torchvision and not all(imports_torchvision(p) for p in sides.values()):
                print(f"{name}: skipped (torchvision does not import on both sides)", flush=True)
                continue
            report(name, {**measure(example, examples, sides, opts),
                          "load": os.getloadavg()[0]})


if __name__ == "__main__":
    main(sys.argv[1:])
