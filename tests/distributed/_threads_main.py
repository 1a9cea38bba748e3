"""Run in a subprocess with CPU_NUM_DEVICES=4 (the test process has one device): for 2 and 4
DataParallel threads, every collective, and training on shards == one device on the batch
(with the loss read on the host each step too)."""
import torch

import torch_xla.distributed.data_parallel as dp
from tests.distributed import _workers as w


def main():
    expected = w.reference_weights()
    for n in (2, 4):
        devices = [f"xla:{i}" for i in range(n)]
        results = dp.DataParallel(torch.nn.Identity(), device_ids=devices)(
            lambda model, loader, device, context: w.collectives(device), [0] * n)
        for r, result in enumerate(results):
            assert len(result) == 28, sorted(result)  # every check ran
            w.assert_results(result)
        # dealt round-robin: round s gives device i shard i of global batch s
        shards = [w.shard(b, n, i) for b in w.global_batches() for i in range(n)]
        for read_loss in (False, True):
            weights = dp.DataParallel(w._model, device_ids=devices)(
                lambda model, loader, device, context: w.train_loop(model, loader, device,
                                                                    read_loss=read_loss), shards)
            for got in weights:
                torch.testing.assert_close(got, expected)
        print(f"ok {n}")


if __name__ == "__main__":
    main()
