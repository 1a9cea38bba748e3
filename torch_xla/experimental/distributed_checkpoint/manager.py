"""CheckpointManager: per-step SPMD checkpoints over torch.distributed.checkpoint.

Each checkpoint lives in `<path>/<step>/` (written through fsspec, so any fsspec URL works)
with the SPMD planners; a small metadata file there, written last (and renamed into
place), marks it complete, and the manager tracks the complete ones, oldest first,
deleting the oldest beyond `max_to_keep` only once a newer one is complete: a process
killed while writing leaves every earlier checkpoint intact and its own ignored.
`save_async` ends the step and reads the state to the host (`_sharded_cpu_state_dict`:
sharded tensors as the blocks this process writes) on the calling thread, as torch_xla does; the
background thread then writes CPU data only. It never touches the lazy engine, whose
values and traces belong to the thread training on (a background read of them raced
with the next steps' tracing). A save that failed raises from `join()` or the next
`save_async`.

The metadata file is JSON (`{"step": ..., "ts": ...}`); one in the pickle torch_xla writes
(and this manager wrote before) is read with only its two classes allowed
(`_MetadataUnpickler`), so that a crafted file runs no code: either kind of file that does
not hold a step and a time marks its checkpoint invalid, as a missing one does.
"""
import io
import json
import logging
import os
import pickle
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import List, Optional

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dist_cp
from fsspec.core import url_to_fs
from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter

import torch_xla
from torch_xla._lazy.runtime import preemption as _preemption

from ._helpers import _sharded_cpu_state_dict
from .planners import SPMDLoadPlanner, SPMDSavePlanner

_METADATA_FILE = ".manager_metadata"


@dataclass
class _CheckpointMetadata:
    step: int
    ts: datetime


class _MetadataUnpickler(pickle.Unpickler):
    """Reads a pickled `_CheckpointMetadata`: no other class may be named in the file."""
    _ALLOWED = {(__name__, "_CheckpointMetadata"): _CheckpointMetadata,
                ("datetime", "datetime"): datetime}

    def find_class(self, module, name):
        found = self._ALLOWED.get((module, name))
        if found is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in checkpoint metadata")
        return found


def _read_metadata(fs, path):
    """The `_CheckpointMetadata` in file `path` of filesystem `fs`, or None (with a warning)
    when it holds none."""
    with fs.open(path, "rb") as f:
        data = f.read()
    try:
        if data.startswith(b"{"):
            fields = json.loads(data)
            meta = _CheckpointMetadata(step=fields["step"], ts=datetime.fromisoformat(fields["ts"]))
        else:
            meta = _MetadataUnpickler(io.BytesIO(data)).load()
        if type(meta) is _CheckpointMetadata and type(meta.step) is int and type(meta.ts) is datetime:
            return meta
        reason = "not a step and a time"
    except Exception as e:  # a file of any content: its checkpoint is not one to restore
        reason = f"{type(e).__name__}: {e}"
    logging.warning(f"Ignoring invalid checkpoint metadata {path}: {reason}")
    return None


def _write_metadata(fs, path, meta) -> None:
    """Writes `meta` to file `path` of filesystem `fs`, complete or not at all."""
    with fs.open(path + ".partial", "wb") as f:
        f.write(json.dumps({"step": meta.step, "ts": meta.ts.isoformat()}).encode())
    fs.mv(path + ".partial", path)


class CheckpointManager:
    """Takes and restores checkpoints identified by their step (see the module docstring).

    Args:
      path: the base path (or fsspec URL) checkpoints are written under.
      save_interval: `save`/`save_async` take one every `save_interval` steps.
      max_to_keep: how many checkpoints to keep (0: all).
      max_pending_async: how many `save_async` checkpoints may be in flight.
      num_of_threads: threads writing each checkpoint.
      process_group: the group coordinating the checkpoint (default: a new subgroup of the
        default one, which must exist).
      chkpt_on_preemption: also take a checkpoint at the first step after a preemption
        notice.
    """

    def __init__(self, path: str, save_interval: int, max_to_keep: Optional[int] = 0,
                 max_pending_async: Optional[int] = 1, num_of_threads: Optional[int] = 1,
                 process_group: dist.ProcessGroup = None, chkpt_on_preemption: bool = True):
        if not dist.is_initialized():
            raise AssertionError("A process group is required.")
        if save_interval <= 0 or max_pending_async <= 0 or max_to_keep < 0:
            raise AssertionError("save_interval and max_pending_async must be positive, "
                                 "max_to_keep non-negative")
        self.base_path = os.path.join(path, "")
        self.save_interval = save_interval
        self.max_to_keep = max_to_keep
        self.num_of_threads = num_of_threads
        self.chkpt_on_preemption = chkpt_on_preemption
        self.pg = process_group or dist.new_group()
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._pending = threading.Semaphore(max_pending_async)
        self._futures = []
        self._save_lock = threading.Lock()
        self._tracked = self._load_tracked()
        if chkpt_on_preemption:
            _preemption.activate()

    def _load_tracked(self):
        fs, raw = url_to_fs(self.base_path)
        found = []
        fs.makedirs(raw, exist_ok=True)  # every host makes it: no check-then-make race
        for path in fs.ls(raw, detail=False):
            meta = os.path.join(path, _METADATA_FILE)
            if not fs.exists(meta):
                logging.warning(f"Ignoring invalid checkpoint: {path}")
            elif (read := _read_metadata(fs, meta)) is not None:
                found.append(read)
        return deque(sorted(found, key=lambda m: m.ts))

    def _path(self, step: int) -> str:
        return os.path.join(self.base_path, str(step))

    def _delete(self, step: int) -> None:
        if dist.get_rank(self.pg) == 0:
            fs, raw = url_to_fs(self._path(step))
            if fs.exists(raw):
                fs.rm(raw, recursive=True)

    def _save(self, step, state_dict) -> None:
        with self._save_lock:
            self._delete(step)
            self._tracked = deque(m for m in self._tracked if m.step != step)
            dist_cp.save(state_dict=state_dict,
                         storage_writer=FsspecWriter(self._path(step), thread_count=self.num_of_threads,
                                                     per_thread_copy_ahead=0),
                         planner=SPMDSavePlanner(), process_group=self.pg)
            meta = _CheckpointMetadata(step=step, ts=datetime.now())
            if dist.get_rank(self.pg) == 0:
                _write_metadata(*url_to_fs(os.path.join(self._path(step), _METADATA_FILE)), meta)
            self._tracked.append(meta)
            while self.max_to_keep and len(self._tracked) > self.max_to_keep:
                self._delete(self._tracked.popleft().step)

    def should_save(self, step: int) -> bool:
        """Whether `step` is one to checkpoint: on the interval, or after a preemption notice."""
        if self.chkpt_on_preemption and self.reached_preemption(step):
            logging.warning(f"Preemption sync point reached at step {step}. Triggering a checkpoint.")
            return True
        return step % self.save_interval == 0

    def save(self, step, state_dict, force: Optional[bool] = False) -> bool:
        """Checkpoints `state_dict` at `step` if it is a step to save (or `force`), before
        returning; returns whether it did."""
        if not (force or self.should_save(step)):
            return False
        torch_xla.sync()
        self._save(step, state_dict)
        return True

    def save_async(self, step: int, state_dict, force: Optional[bool] = False) -> bool:
        """`save`, written by a background thread (at most `max_pending_async` at once)."""
        self._raise_failed()
        if not (force or self.should_save(step)):
            return False
        torch_xla.sync()
        on_host = _sharded_cpu_state_dict(state_dict)
        self._pending.acquire()
        future = self._pool.submit(self._save, step, on_host)
        future.add_done_callback(lambda _: self._pending.release())
        self._futures.append(future)
        return True

    def restore(self, step: int, state_dict) -> None:
        """Loads the checkpoint of `step` into `state_dict` in place (its tensors keep their
        shardings)."""
        self.join()
        if step not in self.all_steps():
            raise AssertionError(f"No checkpoint for step {step} found.")
        dist_cp.load(state_dict=state_dict, storage_reader=FsspecReader(self._path(step)),
                     planner=SPMDLoadPlanner(), process_group=self.pg)

    def all_steps(self) -> List[int]:
        """The steps of every tracked checkpoint."""
        return [m.step for m in self._tracked]

    def join(self) -> None:
        """Waits for every pending `save_async` (and raises its error, if any)."""
        futures, self._futures = self._futures, []
        for future in futures:
            future.result()

    def _raise_failed(self) -> None:
        """Raises the error of a finished `save_async` that failed (the first one)."""
        done = [f for f in self._futures if f.done()]
        self._futures = [f for f in self._futures if not f.done()]
        for future in done:
            future.result()

    def reached_preemption(self, step: int) -> bool:
        """Whether a preemption notice came (all processes agree at `step`)."""
        if not self.chkpt_on_preemption:
            raise RuntimeError("this CheckpointManager was made with chkpt_on_preemption=False")
        return _preemption.reached(step)
