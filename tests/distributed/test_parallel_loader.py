"""ParallelLoader's tuning arguments each do what they say or raise; MpDeviceLoader passes
them on."""
import threading

import pytest
import torch

import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl


def _steps():
    return met.counter_value("MarkStep") or 0


def test_batches_per_execution_ends_a_step_every_n_batches(dev):
    loader = pl.ParallelLoader([torch.ones(1)] * 7, [dev], batches_per_execution=3).per_device_loader(dev)
    marks = []
    for _ in loader:
        marks.append(_steps())
    # as in torch_xla, a step ends at every third call (before batches 3 and 6), and at the end
    assert [m - marks[0] for m in marks] == [0, 0, 1, 1, 1, 2, 2]
    assert _steps() - marks[0] == 3
    with pytest.raises(ValueError, match="at least 1"):
        pl.ParallelLoader([], [dev], batches_per_execution=0)


def test_a_step_end_does_not_wait_for_the_step_before_and_its_check_still_raises(dev):
    """The step the loader ends at each batch waits for no program (the next step's tracing
    overlaps the one before, as in torch_xla); an index check that failed raises at the
    next sync that waits."""
    import torch_xla
    table = torch.randn(3, 2, device=dev)
    loader = pl.MpDeviceLoader([torch.tensor([0, 1]), torch.tensor([0, 5]), torch.tensor([1, 2])], dev)
    waits = met.metric_data("DeviceLockWait")[0] if met.metric_data("DeviceLockWait") else 0
    with pytest.raises(IndexError, match="^index out of range in self"):
        for i in loader:
            torch.nn.functional.embedding(i, table).sum()
            assert (met.metric_data("DeviceLockWait") or [0])[0] == waits
        torch_xla.sync()


def test_prefetch_sizes_bound_the_batches_read_ahead(dev):
    drawn, taken, ahead = [], [0], []
    read_ahead = threading.Event()

    def source():
        for i in range(100):
            drawn.append(i)
            ahead.append(len(drawn) - taken[0])
            if len(drawn) == 5:
                read_ahead.set()
            yield torch.full((2,), float(i))
    loader = pl.ParallelLoader(source(), [dev], loader_prefetch_size=3, device_prefetch_size=2)
    it = loader.per_device_loader(dev)
    assert next(it).cpu().tolist() == [0.0, 0.0]
    taken[0] = 1
    assert read_ahead.wait(timeout=600)  # the threads read ahead while nothing is taken
    values = []
    for b in it:
        values.append(b[0].item())
        taken[0] += 1
    assert values == [float(i) for i in range(1, 100)]
    # never more than queued (3 on the CPU, 2 on the device) and in hand (one in each
    # thread, and the one taken) ahead of what was taken, however the threads ran
    assert max(ahead) <= 3 + 2 + 3, ahead
    loader.close()


def test_unsupported_arguments_raise(dev):
    with pytest.raises(NotImplementedError, match="host_to_device_transfer_threads=2"):
        pl.ParallelLoader([], [dev], host_to_device_transfer_threads=2)


def test_a_round_with_unequal_batches_along_batchdim_ends_the_data():
    """With several devices, the loader's last, smaller batch would give one device a
    different step: the round is dropped (batchdim says where the batch size is)."""
    feed = pl._Feed(2, 8, 8)
    batches = [(torch.zeros(3, 4), torch.zeros(4))] * 2 + [(torch.zeros(3, 4), torch.zeros(4)),
                                                           (torch.zeros(3, 2), torch.zeros(2))]
    reader = threading.Thread(target=pl._read, args=(feed, iter(batches), 2, 1))
    reader.start()
    reader.join(10)
    got = [[feed.cpu[i].get_nowait() for _ in range(feed.cpu[i].qsize())] for i in range(2)]
    assert [len(g) for g in got] == [2, 2] and all(g[-1] is pl._END for g in got)
    feed.closed.set()


def test_mp_device_loader_keeps_its_arguments(dev):
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(6.0)), batch_size=2)
    mp = pl.MpDeviceLoader(data, dev, batches_per_execution=2, device_prefetch_size=1)
    assert mp._parallel_loader_kwargs == {"batches_per_execution": 2, "device_prefetch_size": 1}
    assert mp.dataset is data.dataset and len(mp) == 3
    assert [b[0].cpu().tolist() for b in mp] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert mp._parallel_loader.batches_per_execution == 2
    with pytest.raises(NotImplementedError):
        iter(pl.MpDeviceLoader(data, dev, host_to_device_transfer_threads=4))
