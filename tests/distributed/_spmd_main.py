"""SPMD checks on 8 CPU devices, run by tests/distributed/test_spmd.py in a subprocess
(SPMD mode is for the whole process), a fresh one after a failure (`_check_runner`)."""
import sys

# imported to register their checks
from . import (_spmd_basic, _spmd_ckpt, _spmd_constraints, _spmd_dtensor,  # noqa: F401
               _spmd_fsdp, _spmd_manual)
from ._spmd_harness import CHECKS, main

__all__ = ["CHECKS"]

if __name__ == "__main__":
    main(sys.argv[1:])
