"""Buffers users ask to donate (`_XLAC._set_buffer_donation(t, True)`).

A donor's buffer goes to the next program that reads it, as if no live tensor held it: XLA
writes an output of the same shape and dtype into it, and the tensor becomes a placeholder
(its buffer deleted; reading it raises). A step (`mark_step`) donates donors always; a
`_xla_sync_multi` without `sync_xla_data` only while `with_sync_multi` is on (torch_xla's
"alias with buffer donor config").
"""
import weakref

_donors = {}  # id(jax array) -> weak reference to it
with_sync_multi = [False]


def mark(array, donate: bool) -> None:
    key = id(array)
    if donate:
        _donors[key] = weakref.ref(array, lambda _: _donors.pop(key, None))
    else:
        _donors.pop(key, None)


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
