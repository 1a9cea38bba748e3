"""`xm.ToXlaTensorArena`: converts the tensors of a nested structure in one batch.

`ToXlaTensorArena(convert_fn, select_fn).transform(data)` collects every value of `data`
(through dicts, lists, tuples, sets and objects' attributes) that `select_fn` picks, calls
`convert_fn` once on the list of them, and returns `data` rebuilt with the results in their
places (a tensor found twice is converted once).
"""
import torch_xla.utils.utils as xu


class ToXlaTensorArena:
    def __init__(self, convert_fn, select_fn):
        self._convert_fn, self._select_fn = convert_fn, select_fn

    def transform(self, inputs):
        tensors, index = [], {}

        def collect(value):
            if id(value) not in index:
                index[id(value)] = len(tensors)
                tensors.append(value)
        xu.for_each_instance(inputs, self._select_fn, collect)
        converted = self._convert_fn(tensors) if tensors else []
        return xu.for_each_instance_rewrite(inputs, self._select_fn, lambda v: converted[index[id(v)]])
