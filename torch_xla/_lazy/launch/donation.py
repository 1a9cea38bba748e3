"""Buffers users ask to donate (`_XLAC._set_buffer_donation(t, True)`).

A donor's buffer goes to the next program that reads it, as if no live tensor held it: XLA
writes an output of the same shape and dtype into it, and the tensor becomes a placeholder
(its buffer deleted; reading it raises). A step (`mark_step`) donates donors always; a
`_xla_sync_multi` without `sync_xla_data` only while `with_sync_multi` is on (torch_xla's
"alias with buffer donor config"). A compiled graph (`graph_capture.compiled`) donates the
donors it reads at every call, as torch_xla's dynamo bridge compiles them in; a graph can mark
its own inputs (`torch.ops.xla.dynamo_set_buffer_donor_`, `op_rules.SET_BUFFER_DONOR`).
"""
import weakref

from ..base import counters

_donors = {}  # id(jax array) -> weak reference to it
with_sync_multi = [False]


def mark(array, donate: bool) -> None:
    key = id(array)
    if donate:
        _donors[key] = weakref.ref(array, lambda _: _donors.pop(key, None))
    else:
        _donors.pop(key, None)


def set_donor(value, donate: bool) -> bool:
    """Marks (or unmarks) the buffer of `value` (an engine Value), counted as
    `XlaSetBufferDonation`; False if it has none (it is pending)."""
    if value.data is None:
        return False
    mark(value.data, donate)
    counters.count("XlaSetBufferDonation")
    return True


def any_marked() -> bool:
    return bool(_donors)


def is_donor(array) -> bool:
    ref = _donors.get(id(array))
    return ref is not None and ref() is array


def _live():
    return {k for k, r in list(_donors.items()) if r() is not None}


def release(held: set) -> set:
    """`held` (ids of buffers live tensors hold) less the donors'."""
    return held - _live()


class OnlyDonors:
    """A `held` set holding every buffer but the donors': a program donates those alone."""

    def __init__(self):
        self.donors = _live()

    def __contains__(self, key):
        return key not in self.donors
