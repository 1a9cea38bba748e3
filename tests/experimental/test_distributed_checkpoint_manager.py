"""CheckpointManager's metadata file: JSON written and read back; the pickle torch_xla writes
still read; a file naming any other class marks its checkpoint invalid without running it.
(Saving and restoring checkpoints: tests/distributed/test_spmd.py.)"""
import logging
import pickle
from datetime import datetime

from fsspec.implementations.local import LocalFileSystem

from torch_xla.experimental.distributed_checkpoint import manager

META = manager._CheckpointMetadata(step=7, ts=datetime(2025, 3, 1, 12, 30, 5, 123456))


def test_metadata_is_written_as_json_and_read_back(tmp_path):
    fs, path = LocalFileSystem(), str(tmp_path / ".manager_metadata")
    manager._write_metadata(fs, path, META)
    assert (tmp_path / ".manager_metadata").read_text().startswith('{"step": 7')
    assert manager._read_metadata(fs, path) == META


def test_pickled_metadata_as_torch_xla_writes_it_is_read(tmp_path):
    path = tmp_path / ".manager_metadata"
    path.write_bytes(pickle.dumps(META))
    assert manager._read_metadata(LocalFileSystem(), str(path)) == META


class _CreatesFileWhenUnpickled:
    """What a checkpoint from elsewhere could hold: unpickling it opens (creates) a file."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def test_metadata_that_would_run_code_marks_the_checkpoint_invalid(tmp_path, caplog):
    path, marker = tmp_path / ".manager_metadata", tmp_path / "ran"
    path.write_bytes(pickle.dumps(_CreatesFileWhenUnpickled(str(marker))))
    with caplog.at_level(logging.WARNING):
        assert manager._read_metadata(LocalFileSystem(), str(path)) is None
    assert "io.open is not allowed in checkpoint metadata" in caplog.text
    assert not marker.exists()
    path.write_text('{"step": "7", "ts": "yesterday"}')
    assert manager._read_metadata(LocalFileSystem(), str(path)) is None
