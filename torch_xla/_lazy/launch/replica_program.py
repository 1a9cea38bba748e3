"""The runtime of programs that span the replicas: one SPMD program over their devices.

A graph holding a collective cannot run on its device alone. Its program function is run
under `jax.shard_map` over a 1-D mesh of every replica's device (axis
`pjrt.REPLICA_AXIS`, position = global ordinal): each replica's buffers and scalars
become blocks of global arrays, and each replica takes back its own blocks of the outputs.
Programs are compiled by the runner (`runner.OverReplicas`), once per (graph, mesh).

Under xmp.spawn (one process per device) every process calls the program with its block.
With several replicas in one process (DataParallel's threads) the threads meet at their
run's `Meeting`: each posts its n-th such call, and the last to arrive runs it for all of
them and hands out the outputs.

Between processes a program waits for its peers; one that left, died or stopped taking
part would leave it waiting for ever. So there a program is started on a thread of its own
and waited for as `peer_watch.wait` waits (a peer that left raises `PeerLeft` within seconds,
the watchdog reports a long wait, XLA_COLLECTIVE_TIMEOUT bounds it: `CollectiveTimeout`),
and so are its outputs before anything is next read or run (`settle`).
"""
import concurrent.futures
import threading

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ..base import counters, jax_compat
from ..runtime import peer_watch, pjrt, runner

AXIS = pjrt.REPLICA_AXIS


class Call:
    """One replica's part of a replicated program: the graph's structural `key`, the program
    function `fn(donated, kept, scalars)`, its arguments, the outputs' shapes, what says why
    it was compiled (`explain`, for PT_XLA_DEBUG) and the names of its collectives (for
    messages about waiting on them)."""
    __slots__ = ("key", "fn", "args", "out_shapes", "explain", "collectives")

    def __init__(self, key, fn, args, out_shapes, explain=None, collectives=()):
        self.key, self.fn, self.args, self.out_shapes = key, fn, args, out_shapes
        self.explain, self.collectives = explain, collectives


_meshes = {}


def _mesh():
    devices = tuple(pjrt.replica_mesh_devices())
    mesh = _meshes.get(devices)
    if mesh is None:
        mesh = _meshes[devices] = Mesh(np.array(devices, dtype=object), (AXIS,))
    return mesh


def _weak(block, proto):
    """A replica's scalar from its block, weakly typed again like a Python scalar under jit."""
    x = block.reshape(())
    return x if type(proto) is bool else jax_compat.convert_weak(x, x.dtype)


def _body(call):
    """The program of one replica's blocks: `call.fn` on its leaves and scalars."""
    donated, kept, protos = call.args
    leaf_shapes = [tuple(a.shape) for a in donated + kept]
    n_donated = len(donated)

    def body(leaves, scalars):
        leaves = [b.reshape(()) if not s else b for b, s in zip(leaves, leaf_shapes)]
        scalars = [_weak(b, p) for b, p in zip(scalars, protos)]
        outs = call.fn(tuple(leaves[:n_donated]), tuple(leaves[n_donated:]), tuple(scalars))
        return [o.reshape((1,)) if o.ndim == 0 else o for o in outs]
    return body


def _global_shape(block_shape, world):
    """The shape of the global array whose `world` blocks, one per replica, have
    `block_shape` (a replica's scalar is a block of one)."""
    block_shape = tuple(block_shape) or (1,)
    return (world * block_shape[0],) + block_shape[1:]


def _global_avals(call, mesh):
    """The avals of the global arguments (leaves, scalars) of `call`'s program on `mesh`."""
    sharding = NamedSharding(mesh, PartitionSpec(AXIS))
    donated, kept, protos = call.args
    world = mesh.devices.size
    leaves = [jax.ShapeDtypeStruct(_global_shape(a.shape, world), a.dtype, sharding=sharding)
              for a in donated + kept]
    scalars = [jax.ShapeDtypeStruct((world,), np.array([v]).dtype, sharding=sharding)
               for v in protos]
    return leaves, scalars


def lowered(call):
    """jax's `Lowered` of the replicated program `call` as the replicas run it (each
    argument a global array of every replica's blocks), not compiled and not run."""
    mesh = _mesh()
    return runner.lower(_body(call), _global_avals(call, mesh), runner.OverReplicas(mesh, AXIS))


def compiled(call):
    """The program the replicas run for `call` (compiled now, and cached, if new), not run."""
    mesh = _mesh()
    return _program(call, _global_avals(call, mesh), mesh)


def _program(call, global_args, mesh):
    """The cached program of `call` over `mesh`, compiled for `global_args` if new."""
    placement = runner.OverReplicas(mesh, AXIS)
    program = runner.lookup(call.key, placement)
    if program is None:
        program = runner.compile(_body(call), global_args, placement, key=call.key,
                                 explain=call.explain)
    return program


def _global_args(per_replica, mesh):
    """Global arrays (leaves, scalars) from each local replica's (donated, kept, scalars)."""
    sharding = NamedSharding(mesh, PartitionSpec(AXIS))
    world = mesh.devices.size
    devices = [pjrt.jax_device(i) for i in pjrt.replicas()]
    leaves = []
    for blocks in zip(*[a[0] + a[1] for a in per_replica]):
        blocks = [b.reshape((1,)) if b.ndim == 0 else b for b in blocks]
        leaves.append(jax.make_array_from_single_device_arrays(
            _global_shape(blocks[0].shape, world), sharding, blocks))
    scalars = []
    for values in zip(*[a[2] for a in per_replica]):
        blocks = [jax.device_put(np.array([v]), d) for v, d in zip(values, devices)]
        scalars.append(jax.make_array_from_single_device_arrays((world,), sharding, blocks))
    return leaves, scalars


class GraphsDiffer(RuntimeError):
    """The threads' replicas posted different graphs at one round of their `Meeting`."""


_waiting = []  # (outputs, name) of the last program spanning the processes, not known finished
_executor = []
_spanning_runs = [0]  # programs spanning the processes this process has run


def _waited(fn, what):
    """fn(), run on the collectives' thread and waited for as `peer_watch.wait` does."""
    if not _executor:
        _executor.append(concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="xla-collectives"))
    return peer_watch.wait(_executor[0].submit(fn), what)


def _program_named(call) -> str:
    ops = ", ".join(call.collectives) if call.collectives else "collectives"
    return (f"program {_spanning_runs[0]} spanning the {pjrt.process_count()} processes "
            f"(replicas 0-{pjrt.world_size() - 1}; {ops})")


def settle() -> None:
    """Waits, within the timeout, for the last program spanning the processes to finish."""
    if _waiting:
        outs = _waiting[0]
        _waited(lambda: jax.block_until_ready(outs), f"the outputs of {_waiting[1]}")
        _waiting.clear()


def _run(call, per_replica):
    """Runs the SPMD program of `call`; returns each local replica's outputs."""
    mesh = _mesh()
    global_args = _global_args(per_replica, mesh)
    program = _program(call, global_args, mesh)
    counters.count("ExecuteReplicated")
    with counters.timed("ExecuteReplicatedTime"):
        if pjrt.process_count() > 1:
            settle()
            _spanning_runs[0] += 1
            what = _program_named(call)
            outs = _waited(lambda: runner.execute(program, *global_args, span="ExecuteReplicated"), what)
            _waiting.extend((outs, what))
        else:
            outs = runner.execute(program, *global_args, span="ExecuteReplicated")
    local = [pjrt.jax_device(i) for i in pjrt.replicas()]
    result = [[] for _ in local]
    for out, shape in zip(outs, call.out_shapes):
        blocks = {s.device: s.data for s in out.addressable_shards}
        for r, d in enumerate(local):
            b = blocks[d]
            result[r].append(b.reshape(()) if not shape else b)
    return result


def run(device, call):
    """Outputs of replica `device`'s part of the replicated program `call`."""
    local = pjrt.replicas()
    if device not in local:
        raise RuntimeError(f"xla:{device} runs a collective but is not one of the replicas "
                           f"(xla:{list(local)})")
    if len(local) == 1:
        return _run(call, [call.args])[0]
    meeting = getattr(_attending, "meeting", None)
    if meeting is None:
        raise RuntimeError(f"a collective over the replicas xla:{list(local)} ran on a thread that "
                           "is none of them (a DataParallel run's replicas are its threads)")
    return meeting.join(device, call)


_attending = threading.local()


def attend(meeting) -> None:
    """Makes `meeting` (a `Meeting`, or None) where this thread's replicated programs meet
    the other replicas of its run."""
    _attending.meeting = meeting


class Meeting:
    """Where the threads driving one DataParallel run's replicas meet to run a program
    together (each run has its own: runs keep apart)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.posts, self.results, self.rounds, self.error = {}, {}, {}, None
        self.left = set()  # replicas whose function returned

    def abort(self, error):
        """Wakes every waiting replica with `error` (a replica's thread failed)."""
        with self.cond:
            self.error = error
            self.cond.notify_all()

    def leave(self, device):
        """Replica `device`'s function returned: a round it never posted cannot run, and
        the replicas waiting in one are woken to fail, naming it."""
        with self.cond:
            self.left.add(device)
            self.cond.notify_all()

    def _missing(self, r):
        """The replicas that returned without posting round `r`."""
        return sorted(d for d in self.left if self.rounds.get(d, 0) <= r)

    def join(self, device, call):
        local = pjrt.replicas()
        with self.cond:
            if self.error is not None:
                raise RuntimeError("another replica failed") from self.error
            r = self.rounds.get(device, 0)
            self.rounds[device] = r + 1
            posts = self.posts.setdefault(r, {})
            posts[device] = call
            if len(posts) < len(local):
                while r not in self.results and self.error is None and not self._missing(r):
                    self.cond.wait()
                if r in self.results:
                    return self._take(r, device)
                if self.error is not None:
                    raise RuntimeError("another replica failed") from self.error
                raise peer_watch.PeerLeft(
                    f"replica xla:{device} waited in collective round {r} for replicas "
                    f"xla:{self._missing(r)}, whose function returned without taking part in it")
            del self.posts[r]
        try:
            keys = {p.key for p in posts.values()}
            if len(keys) != 1:
                raise GraphsDiffer("the replicas ran different graphs at one collective step; every "
                                   "replica must run the same operations")
            outs = _run(call, [posts[i].args for i in local])
            result = {i: outs[k] for k, i in enumerate(local)}
        except BaseException as e:  # every replica of the round raises it
            result = {i: e for i in local}
        with self.cond:
            self.results[r] = result
            self.cond.notify_all()
            return self._take(r, device)

    def _take(self, r, device):
        result = self.results[r]
        out = result.pop(device)
        if not result:
            del self.results[r]
        if isinstance(out, BaseException):
            raise out
        return out
