"""A table finding compiled programs again by a key of its own, keeping none of them alive.

The programs live in one bounded cache, the runner's (`runtime/runner`). The look-ups above
it (a step's roots in `graph_cache`, an eager op's key in `op_programs`, a captured graph's
arguments in `graph_capture/compiled`) each keep a `ProgramTable`: a weak reference to the
program and what the caller keeps beside it, so the tables never hold a program back. One
found may since have left the runner's cache (`runner.is_cached`, which callers ask where it
matters before a launch; a walk's launch asks it itself): it is compiled again.
"""
import weakref


class ProgramTable:
    """Programs by key, each with what the caller keeps beside it; at most `limit` entries,
    then forgotten together (a table is a shortcut: a miss only costs the longer way)."""
    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int = 4096):
        self._entries, self._limit = {}, limit

    def get(self, key):
        """(program, extra) kept under `key` while the program lives, else None."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        program = entry[0]()
        return None if program is None else (program, entry[1])

    def put(self, key, program, extra=None) -> None:
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[key] = (weakref.ref(program), extra)

    def clear(self) -> None:
        self._entries.clear()
