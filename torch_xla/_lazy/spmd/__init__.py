"""SPMD's wing: one program over every device, partitioned by XLA, one module per job.

- `layout`: the data model (jax meshes and NamedShardings, the virtual device's data,
  placement, shards, shardings printed as torch_xla prints them);
- `mark_sharding`: the front of `xs.mark_sharding` (reshard data, constrain pending
  values, keep shardings through in-place updates, read and load shards);
- `constraint_lowering`: the sharding-constraint nodes' lowerings;
- `manual_regions`: enable/disable_manual_sharding's per-shard regions (jax's shard_map);
- `program`: a step's walk as one program over the mesh (`runner.OnMesh`).
Nothing is imported here: each module sits on its own stage of the engine (ARCHITECTURE.md).
"""
