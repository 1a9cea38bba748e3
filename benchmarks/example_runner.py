"""Runs one of upstream torch_xla's example training scripts, unmodified, under whichever
torch_xla the interpreter imports, in blocks of steps that `upstream_examples.py` asks for.

    python example_runner.py SPEC_JSON REPORT_FD

SPEC: {"script": path, "argv": [...], "examples": upstream's examples/ folder,
"config": {field: value} (DecoderOnlyConfig's defaults, for the scripts that take no
arguments), "batch_divisor": n (the fake data's batch divided by n, for the ResNet
scripts, whose sizes are fixed in the trainer), "flops": whether to count the FLOPs of the
programs run (this package's runner; XLA's cost analysis)}.

The script runs as `python SCRIPT ARGV` would run it (its folder first on sys.path). Its
device loader (`MpDeviceLoader`, which every example iterates) waits before the first step
for a command on stdin: `run N` runs N steps, then waits for the device and writes one JSON
line on REPORT_FD (seconds, steps, compilations, FLOPs); `stop` ends the loader and so the
training loop. The first line written is {"ready": true}.
"""
import dataclasses
import json
import os
import runpy
import sys
import time


def _override_config(examples, config):
    """DecoderOnlyConfig's defaults set to `config`, before any trainer module is imported
    (TrainDecoderOnlyBase's default argument `config=DecoderOnlyConfig()` is made then)."""
    sys.path.insert(0, examples)
    import decoder_only_model
    cls = decoder_only_model.DecoderOnlyConfig
    unknown = set(config) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"DecoderOnlyConfig has no field {sorted(unknown)}")
    for name, value in config.items():
        setattr(cls, name, value)
    cls.__init__.__defaults__ = tuple(config.get(f.name, f.default) for f in dataclasses.fields(cls))
    sys.path.remove(examples)


def _shrink_batches(divisor):
    """The fake data of `xu.SampleGenerator` with its batch (first) dimension divided."""
    import torch_xla.utils.utils as xu
    init = xu.SampleGenerator.__init__

    def shrunk(self, data, sample_count):
        init(self, tuple(t[:max(1, t.shape[0] // divisor)] for t in data), sample_count)
    xu.SampleGenerator.__init__ = shrunk


class _FlopCounter:
    """FLOPs of the programs this package's runner launches (XLA's cost analysis, once per
    program)."""

    def __init__(self):
        from torch_xla._lazy.runtime import runner
        from common import program_flops
        self.total, self._known, execute = 0.0, {}, runner.execute

        def counted(executable, *args, **kwargs):
            compiled = executable.compiled
            flops = self._known.get(id(compiled))
            if flops is None:
                flops = self._known[id(compiled)] = program_flops(compiled)
            self.total += flops
            return execute(executable, *args, **kwargs)
        runner.execute = counted


def _compilations():
    import torch_xla.debug.metrics as met
    data = met.metric_data("CompileTime")
    return data[0] if data else 0


def _gate(report, flops):
    """Wraps MpDeviceLoader's iterator: steps in blocks, as stdin asks."""
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.parallel_loader as pl
    iterate = pl.MpDeviceLoader.__iter__

    def send(figures):
        report.write(json.dumps(figures) + "\n")
        report.flush()

    def gated(loader):
        batches = iterate(loader)
        send({"ready": True})
        while True:
            command = sys.stdin.readline().split()
            if not command or command[0] == "stop":
                return
            xm.wait_device_ops()
            compiled, start = _compilations(), time.perf_counter()
            if flops:
                flops.total = 0.0
            for _ in range(int(command[1])):
                yield next(batches)
            xm.wait_device_ops()
            send({"seconds": time.perf_counter() - start, "steps": int(command[1]),
                  "compiles": _compilations() - compiled, "flops": flops.total if flops else None})
    pl.MpDeviceLoader.__iter__ = gated


def main(spec, report_fd):
    spec = json.loads(spec)
    report = os.fdopen(int(report_fd), "w")
    if spec.get("config"):
        _override_config(spec["examples"], spec["config"])
    if spec.get("batch_divisor", 1) > 1:
        _shrink_batches(spec["batch_divisor"])
    flops = _FlopCounter() if spec.get("flops") else None  # (common: beside this file)
    _gate(report, flops)
    sys.path[0] = os.path.dirname(spec["script"])
    sys.argv = [spec["script"], *spec["argv"]]
    runpy.run_path(spec["script"], run_name="__main__")


if __name__ == "__main__":
    main(*sys.argv[1:])
