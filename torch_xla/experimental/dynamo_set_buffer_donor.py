"""torch_xla 2.4's module that registered `torch.ops.xla.dynamo_set_buffer_donor_`: the op is
registered when torch_xla is imported now, and importing this only warns, as torch_xla's does."""
import warnings

warnings.warn("dynamo_set_buffer_donor_ will be auto registered starting 2.5 release, please "
              "remove this import")
