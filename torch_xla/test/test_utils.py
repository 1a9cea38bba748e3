"""torch_xla.test.test_utils (imported as `xtu`): what torch_xla's training scripts and tests
print and log: progress lines, TensorBoard scalars (with the XLA metrics), isolated tests."""
import multiprocessing
import time
import unittest
from datetime import datetime

import torch_xla.debug.metrics as met
import torch_xla.runtime as xr


def mp_test(func):
    """Runs a `unittest.TestCase` method in a process of its own (a test that must not share
    the runtime of the others); the test fails if that process fails."""

    def wrapper(*args, **kwargs):
        proc = multiprocessing.Process(target=func, args=args, kwargs=kwargs)
        proc.start()
        proc.join()
        if args and isinstance(args[0], unittest.TestCase):
            args[0].assertEqual(proc.exitcode, 0)
        return proc.exitcode

    return wrapper


def _device_spec(device):
    return f"{device}/{xr.global_ordinal()}"


def _xla_metrics():
    """The engine's counters, and each timed metric's sample count and total (seconds for
    times), by name: what `write_to_summary(write_xla_metrics=True)` logs."""
    scalars = {name: met.counter_value(name) for name in met.counter_names()}
    for name in met.metric_names():
        total, accumulated, _ = met.metric_data(name)
        scalars[f"{name}__TotalSamples"] = total
        scalars[f"{name}__Accumulator" + ("_sec" if name.endswith("Time") else "")] = (
            accumulated / 1e9 if name.endswith("Time") else accumulated)
    return scalars


def write_to_summary(summary_writer, global_step=None, dict_to_write={}, write_xla_metrics=False):
    """Writes `dict_to_write`'s scalars to a TensorBoard SummaryWriter (None: nothing), and with
    `write_xla_metrics` the XLA counters and metrics too, plus 'aten_ops_sum': the ops that
    ran on the CPU fallback."""
    if summary_writer is None:
        return
    for name, value in dict_to_write.items():
        summary_writer.add_scalar(name, value, global_step)
    if write_xla_metrics:
        scalars = _xla_metrics()
        for name, value in scalars.items():
            summary_writer.add_scalar(name, value, global_step)
        summary_writer.add_scalar("aten_ops_sum", sum(v for k, v in scalars.items() if k.startswith("aten::")),
                                  global_step)


def close_summary_writer(summary_writer):
    """Flushes and closes a SummaryWriter (None: nothing)."""
    if summary_writer is not None:
        summary_writer.flush()
        summary_writer.close()


def get_summary_writer(logdir):
    """A tensorboardX SummaryWriter logging to `logdir` (None without a logdir)."""
    if logdir:
        from tensorboardX import SummaryWriter
        writer = SummaryWriter(log_dir=logdir)
        write_to_summary(writer, 0, dict_to_write={"TensorboardStartTimestamp": time.time()})
        return writer
    return None


def now(format="%H:%M:%S"):
    return datetime.now().strftime(format)


def _print_line(items):
    print("|", " ".join(item for item in items if item), flush=True)


def print_training_update(device, step, loss, rate, global_rate, epoch=None, summary_writer=None):
    """Prints a training progress line: device/ordinal, epoch, step, loss, rates, time; the
    rates also go to `summary_writer`."""
    _print_line(["Training", f"Device={_device_spec(device)}",
                 f"Epoch={epoch}" if epoch is not None else None, f"Step={step}",
                 f"Loss={loss:.5f}", f"Rate={rate:.2f}", f"GlobalRate={global_rate:.2f}", f"Time={now()}"])
    if summary_writer:
        write_to_summary(summary_writer, dict_to_write={"examples/sec": rate, "average_examples/sec": global_rate})


def print_test_update(device, accuracy, epoch=None, step=None):
    """Prints a test result line: device/ordinal, step, epoch, accuracy, time."""
    _print_line(["Test", f"Device={_device_spec(device)}", f"Step={step}" if step is not None else None,
                 f"Epoch={epoch}" if epoch is not None else None,
                 f"Accuracy={accuracy:.2f}" if accuracy is not None else None, f"Time={now()}"])
