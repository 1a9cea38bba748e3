"""Under torchrun on two hosts, one process each: after a first collective together, rank 1's
program ends (its function returns) while rank 0 waits for it in an all_reduce. Rank 0 must
fail within seconds, naming process 1 and how it left, rather than wait for ever. Rank 1
prints a RETURNED line (JSON: the time it returned)."""
import time

import torch

import torch_xla
import torch_xla.core.xla_model as xm
import torch_xla.runtime as xr
from tests.multihost.report import emit


def main(index):
    device = torch_xla.device()
    xm.all_reduce("sum", torch.ones(2, device=device)).cpu()
    if xr.global_ordinal() == 1:
        emit("RETURNED", {"at": time.time()})
        return
    xm.all_reduce("sum", torch.ones(2, device=device)).cpu()


if __name__ == "__main__":
    torch_xla.launch(main)
