"""Where PyTorch's dynamo backends look for torch_xla's bridge (see torch_xla._dynamo)."""
from torch_xla._dynamo.dynamo_bridge import extract_compiled_graph  # noqa: F401
