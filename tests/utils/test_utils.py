"""torch_xla.utils.utils: walking nested data (for_each_instance, for_each_instance_rewrite)."""
import torch_xla.utils.utils as xu


class Holder:
    def __init__(self, a, b):
        self.a, self.b = a, b


def test_rewrite_visits_in_the_order_of_for_each_instance_and_each_object_once():
    shared = Holder({"k": [1, 2], 4.5: "y"}, ("f", 17))
    data = {2.25: 11, "w": [12, shared, Holder(None, 3)], 123: shared}
    leaf = lambda x: isinstance(x, (int, str, float))  # noqa: E731
    seen, rewritten = [], []
    xu.for_each_instance(data, leaf, seen.append)
    out = xu.for_each_instance_rewrite(data, leaf, lambda x: rewritten.append(x) or x)
    assert seen == rewritten == [2.25, 11, "w", 12, "k", 1, 2, 4.5, "y", "f", 17, 3, 123]
    assert out["w"][1] is out[123] and out["w"][1] is not shared  # one copy of the shared object
    assert out["w"][1].b == ["f", 17]  # tuples come back as lists


def test_rewrite_replaces_what_is_selected():
    out = xu.for_each_instance_rewrite({"a": [1, "s", 2.0]}, lambda x: isinstance(x, int),
                                       lambda x: x * 10)
    assert out == {"a": [10, "s", 2.0]}
