"""The replicas' wing: programs with collectives over every replica's device.

- `collective_ops`: the front `xm`'s collectives record their nodes through;
- `collective_lowering`: those nodes' lowerings (jax.lax collectives over the replica axis);
- `program`: a graph holding a collective run as one program over the replicas
  (`runner.OverReplicas`), DataParallel's threads and xmp.spawn's processes meeting there.
Nothing is imported here: each module sits on its own stage of the engine (ARCHITECTURE.md).
"""
