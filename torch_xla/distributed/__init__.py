"""Several devices: xmp.spawn (a process each), ParallelLoader, DataParallel (a thread each),
and torch.distributed's 'xla' backend."""
