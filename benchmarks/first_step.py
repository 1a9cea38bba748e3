"""The first step of one workload in this fresh process, as a user's script meets it (imports
done, model built and on the device, then one step: tracing, compilation, the run).
`python first_step.py <workload> ours|jax` prints one JSON line; `common.first_steps` runs it."""
import json
import sys

import torch_xla.core.xla_model as xm
import torch_xla.debug.metrics as met
from common import first_step_time


def main(workload, which):
    module = __import__(workload)
    if which == "ours":
        step = module.torch_step_fn(xm.xla_device(), True)
        xm.wait_device_ops()
        met.clear_counters()
        seconds = first_step_time(step, xm.wait_device_ops)
        figures = {"seconds": seconds, "probes": met.counter_value("ErrorProbe") or 0,
                   "full_size_probes": met.counter_value("FullSizeErrorProbe") or 0}
    else:
        step, sync, _ = module.jax_step_fn()
        sync()
        figures = {"seconds": first_step_time(step, sync)}
    print(json.dumps(figures))


if __name__ == "__main__":
    main(*sys.argv[1:])
