"""Whether a directory's contents are this user's alone: what the persistent cache requires,
since a compiled program found there is machine code this process runs as its own.

A directory is trusted when it and every directory above it belong to this user or to root
and none is writable by its group or by everyone, except that a directory above it may be
when it has the sticky bit and the next one down belongs to this user or to root (as /tmp:
others may add entries there, but not rename or remove ours). The path is followed through
its symbolic links first: the caller then uses the path that was checked.
"""
import os
import stat


def resolved(path) -> str:
    """`path` made absolute, its symbolic links followed (the path to check and to use)."""
    return os.path.realpath(os.fspath(path))


def writable_by_others(path) -> str | None:
    """Why users other than this one (and root) could change what directory `path` (already
    `resolved`) holds, or None when they cannot. Always None where there are no user ids."""
    if not hasattr(os, "getuid"):
        return None
    trusted_owners = (os.getuid(), 0)
    current, below_owner = path, None
    while True:
        st = os.stat(current)
        if st.st_uid not in trusted_owners:
            return f"{current} belongs to another user (uid {st.st_uid})"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            sticky = st.st_mode & stat.S_ISVTX and below_owner in trusted_owners
            if current == path or not sticky:
                return f"{current} is writable by {'everyone' if st.st_mode & stat.S_IWOTH else 'its group'}"
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current, below_owner = parent, st.st_uid
