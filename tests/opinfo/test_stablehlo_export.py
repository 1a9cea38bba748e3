"""Every other entry of the OpInfo slice of tests/opinfo/test_opinfo.py, each exported with torch.export and
`torch_xla.stablehlo.exported_program_to_stablehlo` and run on the XLA device: results equal
to the CPU's. An entry torch.export cannot export is not ours to judge; an entry that fails
must fail only for ops without a lowering (the lazy path runs those on the CPU, which one
StableHLO program cannot), never with a wrong result. The whole database runs with
`python -m tests.opinfo.export_harness`."""
import pytest
import torch

from . import catalog, export_harness

# float32 entries only; an export costs a second: half of them keeps CI short
SLICE = [(eid, op) for eid, op, dtype in catalog.ci_slice() if dtype == torch.float32][::2]


@pytest.mark.parametrize("eid,op", SLICE, ids=[eid for eid, _ in SLICE])
def test_entry_exports_and_runs(eid, op):
    status, detail = export_harness.export_entry(op)
    assert status != "wrong", f"WRONG RESULT: {detail}"
    if status == "fail":
        assert detail.startswith("Unsupported: cannot lower into one XLA program"), detail


# Entries whose ops jax would lower to library calls a StableHLO module cannot hold
# (LAPACK's ormqr, geqrf, sytrf) or that have portable lowerings of their own: each exports.
PORTABLE = {"ormqr", "geqrf", "frexp", "igamma", "igammac", "histc", "histogram", "histogramdd",
            "hash_tensor", "nn.functional.pdist", "nn.functional.linear_cross_entropy.chunked",
            "nn.functional.linear_cross_entropy.chunked_none", "linalg.ldl_factor",
            "linalg.ldl_factor_ex", "linalg.ldl_solve"}
PORTABLE_ENTRIES = [(eid, op) for eid, op in catalog.entries() if eid in PORTABLE]


@pytest.mark.parametrize("eid,op", PORTABLE_ENTRIES, ids=[eid for eid, _ in PORTABLE_ENTRIES])
def test_portable_lowering_exports(eid, op):
    status, detail = export_harness.export_entry(op)
    assert status == "pass", f"{status}: {detail}"
