"""torch_xla.utils.utils (imported as `xu`): small helpers that torch_xla's scripts and
clients use: environment flags, synthetic data, walking nested data, timing, saving a file
whole or not at all."""
import contextlib
import copy
import os
import shutil
import socket
import sys
import tempfile
import time
from concurrent import futures

import torch


class Cleaner:
    """Calls `func` when the object is garbage collected."""

    def __init__(self, func):
        self.func = func

    def __del__(self):
        self.func()


class LazyProperty:
    """`value` is `gen_fn()`, computed on first access and kept."""

    def __init__(self, gen_fn):
        self._gen_fn = gen_fn
        self._value = None

    @property
    def value(self):
        if self._gen_fn is not None:
            self._value, self._gen_fn = self._gen_fn(), None
        return self._value


class TmpFolder:
    """A temporary directory (`name`), removed when the object is collected."""

    def __init__(self):
        self.name = tempfile.mkdtemp()
        self.cleaner = Cleaner(lambda: shutil.rmtree(self.name, ignore_errors=True))


class SampleGenerator:
    """An iterable that yields `data` `sample_count` times: a stand-in for a DataLoader
    when a script trains on synthetic ("fake") data."""

    def __init__(self, data, sample_count):
        self._data = data
        self._sample_count = sample_count
        self._count = 0

    def __iter__(self):
        return SampleGenerator(self._data, self._sample_count)

    def __len__(self):
        return self._sample_count

    def __next__(self):
        if self._count >= self._sample_count:
            raise StopIteration
        self._count += 1
        return self._data

    next = __next__


class FnDataGenerator:
    """An iterable of `count` batches `(data, func(data))`, `data` made by
    `gen_tensor(batch_size, *dims)`."""

    def __init__(self, func, batch_size, gen_tensor, dims=None, count=1):
        self._func = func
        self._batch_size = batch_size
        self._gen_tensor = gen_tensor
        self._dims = list(dims) if dims else [1]
        self._count = count
        self._emitted = 0

    def __len__(self):
        return self._count

    def __iter__(self):
        return FnDataGenerator(self._func, self._batch_size, self._gen_tensor, self._dims, self._count)

    def __next__(self):
        if self._emitted >= self._count:
            raise StopIteration
        self._emitted += 1
        data = self._gen_tensor(self._batch_size, *self._dims)
        return data, self._func(data)

    next = __next__


class DataWrapper:
    """Base of objects that `for_each_instance(_rewrite)` (and so `xm.send_cpu_data_to_device`)
    see through: `get_tensors()` lists the tensors inside, `from_tensors(ts)` rebuilds the
    object around replacements of them (in the same order)."""

    def get_tensors(self):
        raise NotImplementedError(f"{type(self).__name__}.get_tensors is not implemented")

    def from_tensors(self, tensors):
        raise NotImplementedError(f"{type(self).__name__}.from_tensors is not implemented")


def as_list(t):
    return t if isinstance(t, (tuple, list)) else [t]


def getenv_as(name, type, defval=None):
    """Environment variable `name` converted by `type` (bool: through int, so '0' is False),
    or `defval` when unset."""
    value = os.environ.get(name)
    if value is None:
        return defval
    return bool(int(value)) if type is bool else type(value)


def check_env_flag(name, default=''):
    """True when variable `name` is 'true' or a positive integer."""
    flag = os.getenv(name, default)
    return flag == 'true' or (flag.isdigit() and int(flag) > 0)


def _visit(value, select_fn, fn, seen):
    if id(value) in seen:
        return
    seen.add(id(value))
    if select_fn(value):
        fn(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            _visit(k, select_fn, fn, seen)
            _visit(v, select_fn, fn, seen)
    elif isinstance(value, (list, tuple, set)):
        for x in value:
            _visit(x, select_fn, fn, seen)
    elif isinstance(value, DataWrapper):
        for x in value.get_tensors():
            _visit(x, select_fn, fn, seen)
    elif hasattr(value, '__dict__'):
        for v in list(value.__dict__.values()):
            _visit(v, select_fn, fn, seen)


def for_each_instance(value, select_fn, fn):
    """Calls `fn(x)` once for every object `x` inside `value` (through dicts, lists, tuples,
    sets, DataWrappers and objects' attributes) for which `select_fn(x)` holds."""
    _visit(value, select_fn, fn, set())


def _rewrite(value, select_fn, fn, done):
    if id(value) in done:
        return done[id(value)]
    if select_fn(value):
        result = done[id(value)] = fn(value)
    elif isinstance(value, dict):
        result = done[id(value)] = {}
        for k, v in value.items():  # the key first, as for_each_instance visits them
            key = _rewrite(k, select_fn, fn, done)
            result[key] = _rewrite(v, select_fn, fn, done)
    elif isinstance(value, set):
        result = done[id(value)] = set()
        for x in value:
            result.add(_rewrite(x, select_fn, fn, done))
    elif isinstance(value, (list, tuple)):
        # A list stands in for tuples too: it must exist (for cycles) before its items do.
        result = done[id(value)] = []
        result.extend(_rewrite(x, select_fn, fn, done) for x in value)
    elif isinstance(value, DataWrapper):
        result = value.from_tensors([_rewrite(x, select_fn, fn, done) for x in value.get_tensors()])
        done[id(value)] = result
    elif hasattr(value, '__dict__'):
        result = done[id(value)] = copy.copy(value)
        for k, v in list(result.__dict__.items()):
            result.__dict__[k] = _rewrite(v, select_fn, fn, done)
    else:
        result = done[id(value)] = value
    return result


def for_each_instance_rewrite(value, select_fn, fn):
    """A copy of `value` in which each `x` with `select_fn(x)` is replaced by `fn(x)`. As in
    torch_xla, tuples come back as lists and other objects as shallow copies."""
    return _rewrite(value, select_fn, fn, {})


def shape(inputs):
    """The nesting shape of lists/tuples of equal length: `[len, *shape(inner)]`."""
    out = []
    if isinstance(inputs, (list, tuple)):
        inner = None
        for x in inputs:
            s = shape(x)
            if inner is None:
                inner = s
            elif inner != s:
                raise ValueError(f"ragged nesting: {inner} vs {s}")
        out.extend([len(inputs)] + (inner or []))
    return out


def flatten_nested_tuple(inputs):
    if isinstance(inputs, (list, tuple)):
        return tuple(x for item in inputs for x in flatten_nested_tuple(item))
    return (inputs,)


def list_copy_append(ilist, item):
    return list(ilist) + [item]


def null_print(*args, **kwargs):
    """Prints nothing (the printer `get_print_fn` gives when DEBUG is off)."""


def eprint(*args, **kwargs):
    print(*args, file=sys.stderr, **kwargs)


def get_print_fn(debug=None):
    if debug is None:
        debug = int(os.environ.get('DEBUG', '0'))
    return eprint if debug else null_print


def timed(fn, msg='', printfn=eprint):
    """`fn()`, printing how long it took (in ms) after `msg`."""
    printfn = printfn or get_print_fn()
    start = time.time()
    result = fn()
    printfn('{}{:.3f}ms'.format(msg, 1000.0 * (time.time() - start)))
    return result


class TimedScope:
    """`with TimedScope(msg):` prints how long the block took, unless `set_error` was called."""

    def __init__(self, msg='', printfn=eprint):
        self._msg = msg
        self._printfn = printfn or get_print_fn()
        self._error = None

    def __enter__(self):
        self._start = time.time()
        return self

    def __exit__(self, *exc):
        if self._error is None:
            self._printfn('{}{:.3f}ms'.format(self._msg, 1000.0 * (time.time() - self._start)))

    def set_error(self, error):
        self._error = error


def get_free_tcp_ports(n=1):
    ports = []
    for _ in range(n):
        with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
            s.bind(('', 0))
            ports.append(s.getsockname()[1])
    return ports


def parallel_work(num_workers, fn, *args):
    """`list(map(fn, *args))` over `num_workers` threads; a worker's exception is raised."""
    with futures.ThreadPoolExecutor(max_workers=num_workers) as executor:
        return list(executor.map(fn, *args))


def atomic_save(data, path) -> None:
    """torch.save to a temporary file beside `path`, flushed to disk, then renamed over
    `path`: an interrupted save leaves the previous file whole."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
