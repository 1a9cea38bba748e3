"""torch_xla.core.xla_env_vars: the names of the environment variables torch_xla reads."""


def test_environment_variable_names():
    import torch_xla.core.xla_env_vars as xenv
    names = {k: v for k, v in vars(xenv).items() if k.isupper()}
    assert names["PJRT_DEVICE"] == "PJRT_DEVICE" and names["TPU_VISIBLE_CHIPS"] == "TPU_VISIBLE_CHIPS"
    assert names["TPU_MESH_CTLER_ADDR"] == "TPU_MESH_CONTROLLER_ADDRESS"
    assert all(k == v for k, v in names.items() if not k.startswith("TPU_MESH_CTLER"))
