"""The version: the torch_xla API this package implements (2.9.0), with this project's own
release as the local label (+jax.0.1.0), so that version-gated clients see the API they can use
and nobody mistakes it for upstream's build."""
__version__ = "2.9.0+jax.0.1.0"

# The torch and jax releases whose whole suite passed (scripts/test-matrix,
# docs/reference/releases.md): from the first, up to the second (not included). pyproject.toml
# declares the same ranges; tests/test_packaging.py keeps them equal.
TESTED_TORCH = ("2.9.0", "2.16")
TESTED_JAX = ("0.10.2", "0.11")


def _release(version: str) -> tuple:
    """The numeric release of a version string ('2.10.0+cu128' -> (2, 10, 0))."""
    import re
    return tuple(int(part) for part in re.match(r"[\d.]*\d", version).group(0).split("."))


def warn_if_untested(library: str, version: str) -> bool:
    """Warns (and says True) where `library` ('torch' or 'jax') at `version` is outside the
    range tested; the import goes on, as most releases work."""
    first, past = TESTED_TORCH if library == "torch" else TESTED_JAX
    if _release(first) <= _release(version) < _release(past):
        return False
    import warnings
    warnings.warn(
        f"torch_xla {__version__} was tested with {library} >={first},<{past}, not {version}: "
        f"it goes on, untested there. In a checkout of torch-xla-jax, `scripts/test-matrix "
        f"--{library} {version}` runs the test suite on that release.", stacklevel=3)
    return True
