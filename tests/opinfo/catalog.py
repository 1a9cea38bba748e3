"""Which OpInfo entries run, what family each belongs to, and the expected-failures file.

An entry is one `op_db` item that supports float32 on the CPU, named `name` or
`name.variant`; it runs in every dtype the CPU supports for it. Its family comes from the name's prefix (`nn.functional.`, `linalg.`...),
else from the OpInfo class (unary/binary ufuncs, reductions, spectral), else from the
name sets below.
"""
import functools
import os
import re

import torch
from torch.testing._internal.common_methods_invocations import op_db, wrapper_set_seed

EXPECTED_FILE = os.path.join(os.path.dirname(__file__), "expected_failures.txt")

# The slice tests/opinfo/test_opinfo.py runs: every CI_STRIDE-th entry (from CI_OFFSET) in
# float32, forward and backward, with its error inputs; and in each other dtype the CPU
# supports, CI_PER_DTYPE entries spread over those that support it.
CI_STRIDE = 8
CI_OFFSET = 0
CI_PER_DTYPE = 12

_PREFIXES = (("nn.functional.", "nn.functional"), ("linalg.", "linalg"), ("fft.", "fft"),
             ("special.", "special"), ("masked.", "masked"), ("signal.", "factories/random"),
             ("sparse.", "other"), ("torch.ops.aten.", "other"))

_CLASSES = {"UnaryUfuncInfo": "elementwise unary", "BinaryUfuncInfo": "elementwise binary",
            "ReductionOpInfo": "reductions", "SpectralFuncInfo": "fft"}

_NAMES = {
    "elementwise unary": "clamp clone contiguous resolve_conj resolve_neg zero_ to",
    "elementwise binary": "addcmul addcdiv lerp logaddexp2 where masked_fill isin allclose equal",
    "reductions": """sum_to_size cumsum cumprod cummax cummin logcumsumexp max min median
        nanmedian var_mean std_mean quantile nanquantile aminmax topk kthvalue mode sort argsort
        msort unique unique_consecutive logsumexp norm histc histogram histogramdd bucketize
        searchsorted trace dist diff gradient trapz trapezoid cumulative_trapezoid cov corrcoef
        softmax log_softmax _softmax_backward_data renorm _segment_reduce""",
    "linalg": """addmm addmv addbmm baddbmm dot vdot bmm mv addr mm matmul __rmatmul__ outer inner
        kron tensordot einsum cdist cross cholesky cholesky_inverse cholesky_solve geqrf lu
        lu_unpack lu_solve matrix_exp ormqr qr svd svd_lowrank pca_lowrank pinverse
        triangular_solve logdet block_diag chain_matmul""",
    "fft": "stft istft",
    "factories/random": """arange linspace logspace eye ones zeros full empty empty_like zeros_like
        ones_like full_like new_zeros new_ones new_full new_empty new_empty_strided empty_strided
        empty_permuted scalar_tensor randn randn_like rand_like randint randint_like multinomial
        normal bernoulli cauchy exponential geometric log_normal uniform""",
    "indexing/shape": """broadcast_to broadcast_shapes broadcast_tensors combinations cartesian_prod
        chunk unsafe_chunk view_as_complex expand expand_as expand_copy diag diag_embed diagonal
        diagonal_copy diagonal_scatter alias_copy flip fliplr flipud masked_scatter masked_select
        meshgrid as_strided as_strided_copy as_strided_scatter constant_pad_nd narrow narrow_copy
        view_copy permute permute_copy roll rot90 split unsafe_split split_with_sizes
        split_with_sizes_copy select select_scatter slice slice_scatter tensor_split hsplit vsplit
        dsplit ravel reshape reshape_as view view_as atleast_1d atleast_2d atleast_3d flatten
        unflatten column_stack gather index_fill index_copy index_select index_add index_reduce
        _unsafe_masked_index _unsafe_masked_index_put_accumulate __getitem__ index_put put take
        scatter scatter_add scatter_reduce stack _chunk_cat hstack cat unbind unbind_copy vstack
        dstack unfold unfold_copy movedim squeeze squeeze_copy resize_ resize_as_ take_along_dim
        unsqueeze unsqueeze_copy transpose transpose_copy T H mT mH t t_copy tril triu nonzero
        nonzero_static argwhere repeat_interleave diagflat repeat tile item""",
}
_NAME_FAMILY = {n: fam for fam, names in _NAMES.items() for n in names.split()}

# The entries newer OpInfo marks has_nondeterministic_output (uninitialised memory, kernels
# without a fixed order), for OpInfo releases without that attribute.
_NONDETERMINISTIC_OUTPUT = {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty",
                            "new_empty_strided", "torch.ops.aten._efficient_attention_forward",
                            "torch.ops.aten._flash_attention_forward"}

# Entries OpInfo wraps in wrapper_set_seed although their values do not depend on the seed.
_SEEDED_BUT_DETERMINISTIC = {"item"}


# The order dtypes run in (float32 first): every dtype op_db entries support on the CPU.
DTYPE_ORDER = (torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64,
               torch.complex128, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
               torch.bool, torch.uint16, torch.uint32, torch.uint64, torch.complex32,
               torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)
BACKWARD_DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def entry_dtypes(op):
    """The dtypes the CPU supports for the entry, float32 first."""
    supported = op.supported_dtypes("cpu")
    return [d for d in DTYPE_ORDER if d in supported]


def backward_dtypes(op):
    """The dtypes whose gradients are compared: float32, float64 and bfloat16, where the
    entry supports autograd in them on the CPU."""
    if not op.supports_autograd:
        return []
    supported = op.supported_backward_dtypes("cpu")
    return [d for d in BACKWARD_DTYPES if d in supported]


def entry_id(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


@functools.lru_cache(None)
def entries():
    """op_db entries supporting float32 on the CPU, in op_db's order, ids unique."""
    out, seen = [], set()
    for op in op_db:
        if torch.float32 not in op.supported_dtypes("cpu"):
            continue
        eid = entry_id(op)
        if eid in seen:  # op_db repeats a few names; the later ones get a suffix
            n = 2
            while f"{eid}#{n}" in seen:
                n += 1
            eid = f"{eid}#{n}"
        seen.add(eid)
        out.append((eid, op))
    return tuple(out)


def ci_slice():
    """(entry id, op, dtype) triples: every dtype any entry supports appears."""
    out = [(eid, op, torch.float32) for eid, op in entries()[CI_OFFSET::CI_STRIDE]]
    for k, dtype in enumerate(d for d in DTYPE_ORDER if d != torch.float32):
        having = [(eid, op) for eid, op in entries() if dtype in entry_dtypes(op)]
        if not having:
            continue
        step = max(1, len(having) // CI_PER_DTYPE)
        start = (CI_OFFSET + 3 * k) % step  # each dtype its own entries
        out += [(eid, op, dtype) for eid, op in having[start::step][:CI_PER_DTYPE]]
    return out


def family(op) -> str:
    for prefix, fam in _PREFIXES:
        if op.name.startswith(prefix):
            return fam
    fam = _CLASSES.get(type(op).__name__)
    if fam is not None:
        return fam
    return _NAME_FAMILY.get(op.name, "other")


def is_random(op) -> bool:
    """Values that legitimately differ between the CPU and the device: random ops (OpInfo
    seeds the CPU generator for them with wrapper_set_seed) and uninitialised outputs."""
    nondeterministic = getattr(op, "has_nondeterministic_output", None)
    if nondeterministic is None:  # OpInfo before the attribute (torch 2.9): what it marks now
        nondeterministic = op.name in _NONDETERMINISTIC_OUTPUT
    if nondeterministic:
        return True
    if op.name in _SEEDED_BUT_DETERMINISTIC:
        return False
    f = op.op
    if isinstance(f, functools.partial):
        return f.func is wrapper_set_seed
    code = getattr(f, "__code__", None)
    return code is not None and "wrapper_set_seed" in code.co_names


# ---- the expected-failures file ----------------------------------------------------------
# One line per failing (entry, dtype, direction):
#     <entry id> <dtype> <forward|backward> <status> <category>: <message>
#     <entry id> - errors fail <category>: <message>       (its OpInfo error inputs)
# status is `fallback` (correct, but some op ran on the CPU) or `fail` (an error or timeout).
# Wrong results are never listed: they are bugs.

CATEGORIES = ("not-lowered", "xla-limitation", "pytorch-bug", "engine-bug", "missing-error",
              "value-check", "timeout", "harness")
DIRECTIONS = ("forward", "backward", "errors")
_LINE = re.compile(r"^(\S+) (\S+) (forward|backward|errors) (fallback|fail) ([a-z-]+): ?(.*)$")


def read_expected(path=EXPECTED_FILE):
    """{(entry id, dtype name or '-', direction): (status, category, message)}"""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            m = _LINE.match(line)
            if m is None or m.group(5) not in CATEGORIES:
                raise ValueError(f"{path}:{n}: bad line {line!r}")
            out[(m.group(1), m.group(2), m.group(3))] = (m.group(4), m.group(5), m.group(6))
    return out


_HEADER = """\
# OpInfo (entry, dtype) pairs that do not pass on the XLA device (regenerate with
# `scripts/opinfo_coverage --write-expected`; categories of lines already here are kept).
# <entry> <dtype> <forward|backward> <fallback|fail> <category>: <message>
# <entry> - errors fail <category>: <message>   (OpInfo's error inputs of the entry)
# categories: {}
# Wrong results (no error, different values) are bugs and never listed here.
"""


def write_expected(rows, path=EXPECTED_FILE):
    """rows: {(entry id, dtype, direction): (status, category, message)}"""
    order = {eid: i for i, (eid, _) in enumerate(entries())}
    dorder = {dtype_name(d): i for i, d in enumerate(DTYPE_ORDER)}
    with open(path, "w") as f:
        f.write(_HEADER.format(", ".join(CATEGORIES)))
        for (eid, dtype, direction), (status, cat, msg) in sorted(
                rows.items(), key=lambda kv: (order.get(kv[0][0], 1 << 30),
                                              DIRECTIONS.index(kv[0][2]),
                                              dorder.get(kv[0][1], -1))):
            msg = " ".join(msg.split())[:160]
            f.write(f"{eid} {dtype} {direction} {status} {cat}: {msg}\n")
