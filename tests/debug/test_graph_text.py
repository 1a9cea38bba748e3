"""Seeing inside the graph: IR text, StableHLO/HLO, dot, XLA_FLAGS."""
import os
import re
import textwrap

import torch

import torch_xla._XLAC as XLAC
import torch_xla.core.xla_model as xm
from tests.conftest import assert_same, compiles
from tests.fresh_process import python
from torch_xla._lazy.graph.tensor import unwrap


def _graph(dev):
    a = torch.randn(2, 3, device=dev)
    b = torch.randn(3, 2, device=dev)
    xm.mark_step()
    return a, b, (a.mm(b) + 1).relu()


def test_ir_text_lists_the_pending_ops_without_running_them(dev):
    a, b, c = _graph(dev)
    before = compiles()
    text = XLAC._get_xla_tensors_text([c])
    lines = text.strip().splitlines()
    assert lines[0] == "IR {" and lines[-1] == "}"
    # torch_xla's layout and order (post order, a node's operands visited last first): the
    # op's output shape, its name, operands, then its attributes and where it is a root
    assert lines[1] == "  %0 = f32[] xla::device_data(), xla_shape=f32[]"  # the 1: a float32 parameter
    assert lines[2] == "  %1 = f32[3,2]{1,0} xla::device_data(), xla_shape=f32[3,2]{1,0}"  # b
    assert lines[3] == "  %2 = f32[2,3]{1,0} xla::device_data(), xla_shape=f32[2,3]{1,0}"  # a
    assert lines[4] == "  %3 = f32[2,2]{1,0} aten::mm(%2, %1), xla_shape=f32[2,2]{1,0}"
    assert lines[5] == "  %4 = f32[2,2]{1,0} aten::add(%3, %0), xla_shape=f32[2,2]{1,0}"
    assert lines[6] == "  %5 = f32[2,2]{1,0} aten::relu(%4), xla_shape=f32[2,2]{1,0}, ROOT=0"
    assert len(lines) == 8
    assert "dim=(1,)" in XLAC._get_xla_tensors_text([c.sum(1)])  # a non-tensor argument, named
    assert compiles() == before and unwrap(c)._value.pending
    expected = (a.cpu().mm(b.cpu()) + 1).relu()
    assert_same(c, expected)
    # a tensor holding a buffer is its device data, beside a pending one
    before = compiles()
    assert XLAC._get_xla_tensors_text([c, c * 3]).splitlines()[1:] == [
        "  %0 = f32[2,2]{1,0} xla::device_data(), xla_shape=f32[2,2]{1,0}, ROOT=0",
        "  %1 = f32[] xla::device_data(), xla_shape=f32[]",  # the 3: a float32 parameter
        "  %2 = f32[2,2]{1,0} aten::mul(%0, %1), xla_shape=f32[2,2]{1,0}, ROOT=1", "}"]
    assert compiles() == before


def test_every_python_number_is_a_parameter_but_a_pow_exponent(dev):
    """A Python number at a Scalar argument is a parameter (device data) whatever its value,
    so `x * s` is one program for every int s, 0 and 1 included (torch_xla makes 0 and 1
    constants, a program each); a Python exponent is a constant, a program per exponent."""
    x = torch.randn(3, 11, device=dev)  # a shape of its own: no other test's program
    xm.mark_step()
    assert_same(x * 2, x.cpu() * 2)
    start = compiles()
    for s in (3, 1, 0, -1):
        assert_same(x * s, x.cpu() * s)
    assert compiles() == start
    assert XLAC._get_xla_tensors_text([x * 1]).splitlines()[1] == "  %0 = f32[] xla::device_data(), xla_shape=f32[]"
    text = XLAC._get_xla_tensors_text([torch.pow(x, 5)])
    assert text.splitlines()[1] == "  %0 = s64[] prim::Constant(), xla_shape=s64[]"
    start = compiles()
    assert_same(torch.pow(x, 2), x.cpu() ** 2)
    assert_same(torch.pow(x, 3), x.cpu() ** 3)
    assert compiles() - start == 2


def test_stablehlo_and_hlo_of_the_program_that_would_run(dev):
    _, _, c = _graph(dev)
    before = compiles()
    stablehlo = xm.get_stablehlo([c])
    assert stablehlo.startswith("module @") and "stablehlo.dot_general" in stablehlo
    assert "tensor<2x3xf32>" in stablehlo and "stablehlo.maximum" in stablehlo
    assert xm.get_stablehlo() == stablehlo  # default: every pending tensor (only c here)
    assert XLAC._get_stablehlo([c]) == stablehlo
    hlo = XLAC._get_xla_tensors_hlo([c])
    assert hlo.startswith("HloModule") and " dot(" in hlo and "f32[2,3]" in hlo
    # as torch_xla prints HLO: `%` names, each operand with its shape
    assert re.search(r" dot\(f32\[2,3\]\{1,0\} %[\w.]+, f32\[3,2\]\{1,0\} %", hlo), hlo
    assert compiles() == before and unwrap(c)._value.pending


def test_hlo_names_each_instruction_after_its_opcode(dev):
    _, _, c = _graph(dev)
    hlo = XLAC._get_xla_tensors_hlo([c])
    # as XLA's builders name them (jax's own conversion names them after its primitives)
    assert re.search(r"%dot\.\d+ = f32\[2,2\]\{1,0\} dot\(", hlo), hlo
    assert re.search(r"%maximum\.\d+ = ", hlo) and "%max." not in hlo, hlo


def test_hlo_of_a_pending_collective_is_the_replicas_program(dev, monkeypatch):
    t = xm.all_reduce(xm.REDUCE_SUM, torch.arange(2, device=dev) + 1)
    before = compiles()
    hlo = XLAC._get_xla_tensors_hlo([t])
    assert re.search(r"%all-reduce\.\d+ = s64\[2\]\{0\} all-reduce\(", hlo), hlo
    assert "stablehlo.all_reduce" in xm.get_stablehlo([t])
    assert compiles() == before
    # after XLA's optimizations: the very program the sync then runs, compiled once
    monkeypatch.setenv("XLA_DUMP_POST_OPTIMIZATIONS", "1")
    assert " all-reduce(" in XLAC._get_xla_tensors_hlo([t])
    assert t.tolist() == [1, 2]  # one replica here
    assert compiles() == before + 1


def test_hlo_of_a_tensor_holding_a_buffer_returns_its_parameter(dev):
    a = torch.randn(2, 3, device=dev)
    xm.mark_step()
    before = compiles()
    hlo = XLAC._get_xla_tensors_hlo([a])
    assert re.search(r"ROOT %[\w.]+ = f32\[2,3\]\{1,0\} parameter\(0\)", hlo), hlo
    mixed = XLAC._get_xla_tensors_hlo([a, a * 2])  # a buffer beside a pending tensor
    assert "parameter(0)" in mixed and " multiply(" in mixed
    assert compiles() == before


def test_dot_graph(dev):
    _, _, c = _graph(dev)
    dot = XLAC._get_xla_tensors_dot([c])
    assert dot.startswith("digraph G {") and dot.rstrip().endswith("}")
    assert 'n0 [label="aten.mm.default\\nfloat32[2, 2]"];' in dot
    assert re.search(r"p[01] -> n0 \[label=\"0\"\]", dot) and re.search(r"p[01] -> n0 \[label=\"1\"\]", dot)
    assert "n0 -> n1" in dot and "n2 -> root0" in dot


def test_xla_flags_pass_through_to_xla(tmp_path):
    dump = tmp_path / "dump"
    script = textwrap.dedent("""
        import torch, torch_xla.core.xla_model as xm
        d = xm.xla_device()
        print((torch.ones(3, device=d) * 2).sum().item())
    """)
    out = python("-c", script, env={"XLA_FLAGS": f"--xla_dump_to={dump}"})
    assert out.stdout.strip() == "6.0", out.stderr
    assert any(n.endswith(".txt") and "jit_run_packed" in n for n in os.listdir(dump))


def _report_entry(report, t):
    """The `_xla_tensors_report` entry of tensor `t` (None if not listed)."""
    head = f"Tensor: id={XLAC._xla_get_tensor_id(t)},"
    return report[report.index(head):].split("\n\n")[0] if head in report else None


def test_ir_debug_records_frames_and_scopes_for_the_tensors_report(dev):
    """Under XLA_IR_DEBUG (`_set_ir_debug`) nodes and uploaded values record the profiler
    scope and the Python frames that made them: the IR text names the scope, and
    `_xla_tensors_report` each live tensor's frames and IR; off, neither."""
    import torch_xla.debug.profiler as xp
    before = XLAC._get_ir_debug()
    XLAC._set_ir_debug(True)
    try:
        with xp.Trace("region"):
            a = torch.tensor([1.0, 2.0]).to(dev)
            b = (a * 3).sum()
    finally:
        XLAC._set_ir_debug(before)
    c = a * 2  # made with the recording off
    report = XLAC._xla_tensors_report(0, str(dev))
    for t, nodes in ((a, 1), (b, 4)):
        entry = _report_entry(report, t)
        assert f"ir_nodes={nodes}" in entry and "Frames:" in entry and "scope=region.1" in entry
        assert f"test_ir_debug_records_frames_and_scopes_for_the_tensors_report ({__file__}:" in entry
    assert "scope=region.1" in XLAC._get_xla_tensors_text([b])
    entry = _report_entry(report, c)
    assert "aten::mul(" in entry and "Frames:" not in entry and "scope=" not in entry
    fewer = XLAC._xla_tensors_report(3, str(dev))  # more than 3 nodes: b's graph only
    assert _report_entry(fewer, b) and not _report_entry(fewer, a) and not _report_entry(fewer, c)
