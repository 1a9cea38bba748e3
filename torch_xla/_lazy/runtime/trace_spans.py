"""The runtime's stages as named spans of a profile (jax's TraceMe annotations).

A trace taken with `torch_xla.debug.profiler` shows each transfer, compilation and launch
under the names torch_xla's runtime gives them (`PjRtComputationClient::TransferToDevice`,
`::TransferFromDevice`, `::Compile`, `::ExecuteComputation`, `::ExecuteReplicated`), so the
tools and queries that read torch_xla's profiles find them here. Outside a trace a span
costs a check of whether one is being taken (`recording`, for a caller that skips the span
outright: a launch of an eager op)."""
from jax.profiler import TraceAnnotation

STAGES = ("TransferToDevice", "TransferFromDevice", "Compile", "ExecuteComputation", "ExecuteReplicated")


def span(stage: str) -> TraceAnnotation:
    """A context manager: the span of one runtime `stage` (one of `STAGES`)."""
    assert stage in STAGES, stage
    return TraceAnnotation(f"PjRtComputationClient::{stage}")


recording = TraceAnnotation.is_enabled  # () -> whether a trace is being taken
