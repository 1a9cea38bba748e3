"""torch_xla.debug.profiler writes traces TensorBoard (xplane.pb) and Perfetto open."""
import gzip
import json
import socket
import time

import pytest
import torch

import torch_xla.debug.profiler as xp


def _trace_files(log_dir):
    runs = list((log_dir / "plugins" / "profile").iterdir())
    assert len(runs) == 1
    return {p.name: p for p in runs[0].iterdir()}


def _event_names(files):
    perfetto = json.loads(gzip.decompress(files["perfetto_trace.json.gz"].read_bytes()))
    return {e.get("name"): e for e in perfetto["traceEvents"]}


def test_start_stop_trace_with_annotations(dev, tmp_path):
    xp.start_trace(str(tmp_path))
    try:
        for step in range(2):
            with xp.StepTrace("train_step", step_num=step):
                with xp.Trace("forward"):
                    y = (torch.arange(13.).to(dev).reshape(1, 13) * 2).sum()
        traced = xp.trace_me("helper")(lambda: y.item())
        assert traced() == 156.0
    finally:
        xp.stop_trace()
    files = _trace_files(tmp_path)
    assert any(n.endswith(".xplane.pb") and files[n].stat().st_size > 0 for n in files)
    events = _event_names(files)
    assert {"train_step", "forward", "helper"} <= set(events)
    # the runtime's stages, under torch_xla's names
    stages = ("TransferToDevice", "Compile", "ExecuteComputation", "TransferFromDevice")
    assert {f"PjRtComputationClient::{s}" for s in stages} <= set(events)
    assert events["train_step"]["args"]["step_num"] in ("0", "1")


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_server_and_trace(dev, tmp_path):
    port = _free_port()
    server = xp.start_server(port)
    assert server is not None
    assert xp.start_server(port) is server  # started again on its port: the running one
    step = lambda: (torch.ones(3, device=dev) + 1).sum().item()  # noqa: E731
    step()  # compiled before the capture: no iteration spans the window's end on a busy machine
    try:
        thread = xp.trace_detached(f"localhost:{port}", str(tmp_path), duration_ms=1000)
        while thread.is_alive():  # work throughout the capture window, in short spans
            with xp.Trace("during_capture"):
                step()
        thread.join()
        assert "during_capture" in _event_names(_trace_files(tmp_path))
        with pytest.raises(NotImplementedError, match="only this process's own profiler server"):
            xp.trace("otherhost:9012", str(tmp_path / "x"), duration_ms=10)
    finally:
        xp.stop_server()


def test_a_collected_server_shuts_down_once_its_capture_is_written(dev, tmp_path):
    server = xp.start_server(_free_port())
    port = server.port
    step = lambda: (torch.ones(5, device=dev) * 3).sum().item()  # noqa: E731
    step()
    thread = xp.trace_detached(f"localhost:{port}", str(tmp_path), duration_ms=3000)
    started = time.monotonic()
    while time.monotonic() - started < 1:  # work in short spans, well into the capture
        with xp.Trace("before_shutdown"):
            step()
    del server  # as torch_xla's: shuts the server down after the capture it serves
    assert "before_shutdown" in _event_names(_trace_files(tmp_path))
    thread.join()
    with pytest.raises(NotImplementedError):  # no server serves the port any more
        xp.trace(f"localhost:{port}", str(tmp_path / "again"), duration_ms=10)
    again = xp.start_server(_free_port())  # jax's one server per process is free again
    again.shut_down()


def test_a_step_may_not_end_inside_a_trace_region():
    import torch_xla
    torch_xla.sync()  # a step ended: sibling regions are counted from 1
    with pytest.raises(RuntimeError, match=r"Expecting scope to be empty but it is conv1\.1$"):
        with xp.Trace("conv1"):
            torch_xla.sync()
    torch_xla.sync()  # outside every region: ends the step, ids count from 1 again

    @xp.trace_me("outer")
    def nested():
        with xp.Trace("a"):
            pass
        with xp.Trace("b"):
            torch_xla.sync()
    with pytest.raises(RuntimeError, match=r"but it is outer\.1/b\.2$"):
        nested()
    torch_xla.sync()  # the regions closed: the step ends
    with xp.StepTrace("train_step", step_num=0):  # closes its scope, then ends the step
        pass
