"""A compiled jax program taken apart into its executable's bytes and a JSON description, and
rebuilt from them alone: it runs as the original does; what cannot be described is refused."""
import collections
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from torch_xla._lazy.base.jax_compat import executables as jax_executables


def _step(state, inputs):
    (w, b), x = state, inputs["x"]
    y = x @ w + b
    return [w - 0.1 * y.sum(), b + 1, None, {"y": y, "n": inputs["n"] + 1}]


def _compiled():
    device = jax.devices()[0]
    args = ((jnp.ones((3, 2)), jnp.zeros(2)), {"x": jnp.arange(6.0).reshape(2, 3), "n": 3})
    with jax.default_device(device):
        return jax.jit(_step, donate_argnums=(0,)).lower(*args).compile(), device


def _arguments():
    return (jnp.ones((3, 2)), jnp.zeros(2)), {"x": jnp.arange(6.0).reshape(2, 3), "n": jnp.array(3)}


def test_a_rebuilt_program_runs_as_the_original():
    assert jax_executables.supported()
    compiled, device = _compiled()
    description, executable = jax_executables.describe(compiled, device)
    rebuilt = jax_executables.rebuild(json.loads(json.dumps(description)), executable, device)
    assert rebuilt.in_tree == compiled.in_tree and rebuilt.out_tree == compiled.out_tree
    assert jax.tree.leaves(rebuilt.args_info) == jax.tree.leaves(compiled.args_info)
    expected_args, args = _arguments(), _arguments()
    expected, got = compiled(*expected_args), rebuilt(*args)
    assert jax.tree.structure(got) == jax.tree.structure(expected)
    for g, e in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
        assert g.dtype == e.dtype and g.weak_type == e.weak_type
        np.testing.assert_array_equal(g, e)
    # the donated state was given to the program, as to the original
    assert all(a.is_deleted() for a in args[0] + expected_args[0])
    assert rebuilt.memory_analysis() is not None and "ENTRY" in rebuilt.as_text()


def test_programs_whose_trees_are_not_plain_containers_are_not_described():
    Pair = collections.namedtuple("Pair", "a b")
    device = jax.devices()[0]
    compiled = jax.jit(lambda p: Pair(p.b, p.a)).lower(Pair(jnp.ones(2), jnp.zeros(2))).compile()
    with pytest.raises(ValueError, match="tree node Pair"):
        jax_executables.describe(compiled, device)


@pytest.mark.parametrize("change", [
    lambda d: d.update(args="not a list"),
    lambda d: d["args"][0][0].__setitem__(1, "object"),
    lambda d: d["inputs"][0].__setitem__(2, [[0, 1], None, "eight"]),
    lambda d: d.update(in_tree={"set": []}),
    lambda d: d.pop("kept"),
])
def test_a_malformed_description_is_refused(change):
    compiled, device = _compiled()
    description, executable = jax_executables.describe(compiled, device)
    change(description)
    with pytest.raises((ValueError, KeyError)):
        jax_executables.rebuild(description, executable, device)
