"""experimental.deprecation: old names call the new function and warn once."""
import logging
import sys
import types

from torch_xla.experimental.deprecation import deprecated, mark_deprecated, register_deprecated


def _new(x):
    return x + 1


def test_deprecated_name_calls_the_new_function_and_warns_once(caplog):
    old = deprecated(sys.modules[__name__], _new, "old_name", "Gone in 3.0.")
    with caplog.at_level(logging.WARNING):
        assert old(1) == 2 and old(2) == 3
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [f"{__name__}.old_name is deprecated. Use {__name__}._new instead. Gone in 3.0."]


def test_decorated_function_is_replaced_and_registered_names_warn(caplog):
    @mark_deprecated(_new)
    def before(x):
        return 0

    module = types.ModuleType("m")
    register_deprecated(module, _new)
    with caplog.at_level(logging.WARNING):
        assert before(4) == 5 and module._new(1) == 2
    assert "before is deprecated" in caplog.records[0].getMessage()
    assert caplog.records[1].getMessage().startswith("m._new is deprecated")
