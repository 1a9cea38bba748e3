"""XLA's OpSharding as torch_xla's scripts pass one around: a layout over the devices, built
from torch_xla's arguments, got from a mesh or a tensor, and what a tensor marked in manual
sharding mode takes."""
from ..graph import spmd_layout as layout
from ..launch import manual_regions as manual
from .mark_sharding import mark_manual as _mark_manual


class OpSharding:
    """A layout over the devices. Built from torch_xla's arguments (`OpSharding(
    tile_assignment, group_assignment, replication_groups, sharding_type)`: see
    `layout.from_tile_assignment`), or got from a mesh (`Mesh.get_op_sharding`) or a tensor
    (`_XLAC._get_xla_op_sharding`)."""
    __slots__ = ("sharding", "rank")

    def __init__(self, tile_assignment, group_assignment, replication_groups, sharding_type):
        if int(sharding_type) == manual.MANUAL:
            self.sharding, self.rank = manual.MANUAL_SHARDING, 0
            return
        self.sharding = layout.from_tile_assignment(tile_assignment, group_assignment,
                                                    replication_groups, int(sharding_type))
        self.rank = len(self.sharding.spec)

    @classmethod
    def of(cls, sharding, rank: int) -> "OpSharding":
        """The OpSharding of a jax sharding, for tensors of `rank` dims."""
        op = cls.__new__(cls)
        op.sharding, op.rank = sharding, rank
        return op

    def _text(self) -> str:
        if manual.is_manual(self.sharding):
            return "{manual}"
        return layout.describe(self.sharding, self.rank)

    def __eq__(self, other):
        return type(other) is OpSharding and self._text() == other._text()

    def __hash__(self):
        return hash(self._text())

    def __repr__(self):
        return f"OpSharding({self._text()})"


def mark_manual(t, op_sharding: OpSharding) -> None:
    """Marks `t`, computed inside a manual region, as in manual sharding mode (a region is
    known here from its entries: this only checks and labels)."""
    if not manual.is_manual(op_sharding.sharding):
        raise RuntimeError(f"_mark_manual_sharding takes the manual OpSharding, got {op_sharding}")
    _mark_manual(t)
