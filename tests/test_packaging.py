"""pyproject.toml admits ranges of torch and jax (the ones torch_xla.version names and
scripts/test-matrix runs), its accelerator extras pull jax's matching plugin extra at those
releases, and an import on a release outside them warns."""
import ast
import pathlib
import re

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python 3.11 and newer")

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_accelerator_extras_follow_the_jax_pin():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    jax_pin = next(d for d in project["dependencies"] if d.startswith("jax>") or d.startswith("jax="))
    extras = project["optional-dependencies"]
    for extra, jax_extra in (("cuda", "cuda12"), ("tpu", "tpu")):
        (requirement,) = extras[extra]
        assert requirement == jax_pin.replace("jax", f"jax[{jax_extra}]", 1)


def _requirement(name):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return next(d for d in project["dependencies"] if re.match(rf"{name}\b[^-_a-z]", d))


def _matrix_releases():
    """scripts/test-matrix's TORCH and JAX tuples, read from its source."""
    source = (ROOT / "scripts" / "test-matrix").read_text()
    return {name: ast.literal_eval(re.search(rf"^{name} = (\(.*?\))$", source, re.M).group(1))
            for name in ("TORCH", "JAX")}


def test_metadata_admits_the_tested_ranges_and_pins_nothing():
    from torch_xla import version
    first, past = version.TESTED_TORCH
    assert _requirement("torch") == f"torch>={first},<{past}"
    first, past = version.TESTED_JAX
    assert _requirement("jax") == f"jax>={first},<{past}"
    assert _requirement("jaxlib") == f"jaxlib>={first},<{past}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if "==" in d]


def test_the_matrix_runs_every_minor_release_the_metadata_admits():
    from torch_xla import version
    releases = _matrix_releases()
    lo, hi = (version._release(v) for v in version.TESTED_TORCH)
    minors = {version._release(t)[:2] for t in releases["TORCH"]}
    assert minors == {(lo[0], m) for m in range(lo[1], hi[1])}
    for library, tested in (("TORCH", version.TESTED_TORCH), ("JAX", version.TESTED_JAX)):
        for release in releases[library]:
            assert version._release(tested[0]) <= version._release(release) < version._release(tested[1])


@pytest.mark.parametrize("library,release,warns", [
    ("torch", "2.9.0", False), ("torch", "2.13.0+cpu", False), ("torch", "2.15.0+cu130", False),
    ("torch", "2.8.0", True), ("torch", "2.16.0.dev20261201+cpu", True), ("jax", "0.10.2", False),
    ("jax", "0.11.2", True)])
def test_a_release_outside_the_range_warns_naming_the_range_and_the_matrix(library, release, warns):
    import warnings
    from torch_xla import version
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert version.warn_if_untested(library, release) is warns
    assert len(caught) == warns
    if warns:
        message = str(caught[0].message)
        first, past = version.TESTED_TORCH if library == "torch" else version.TESTED_JAX
        assert f"{library} >={first},<{past}" in message
        assert f"scripts/test-matrix --{library} {release}" in message
