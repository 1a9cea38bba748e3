"""A directory is this user's alone when it and the directories above it are theirs (or
root's) and only they can write there; a sticky directory above it (as /tmp) may be shared."""
import os

import pytest

from torch_xla._lazy.runtime.directory_trust import resolved, writable_by_others


def _directory(path, mode):
    path.mkdir()
    os.chmod(path, mode)
    return path


def test_a_directory_of_ones_own_is_trusted(tmp_path):
    assert writable_by_others(resolved(_directory(tmp_path / "cache", 0o755))) is None


@pytest.mark.parametrize("mode, who", [(0o777, "everyone"), (0o775, "its group"), (0o1777, "everyone")])
def test_a_directory_others_can_write_to_is_not_trusted(tmp_path, mode, who):
    cache = resolved(_directory(tmp_path / "cache", mode))
    assert writable_by_others(cache) == f"{cache} is writable by {who}"


def test_a_shared_directory_above_is_trusted_only_with_the_sticky_bit(tmp_path):
    sticky = _directory(tmp_path / "sticky", 0o1777)
    assert writable_by_others(resolved(_directory(sticky / "cache", 0o755))) is None
    shared = _directory(tmp_path / "shared", 0o777)  # anyone could rename cache and put theirs
    cache = resolved(_directory(shared / "cache", 0o755))
    assert writable_by_others(cache) == f"{resolved(shared)} is writable by everyone"


def test_a_link_is_followed_to_the_directory_it_names(tmp_path):
    shared = _directory(tmp_path / "shared", 0o777)
    (tmp_path / "link").symlink_to(shared)
    assert resolved(tmp_path / "link") == resolved(shared)
    assert writable_by_others(resolved(tmp_path / "link")) is not None


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give a directory away")
def test_a_directory_of_another_user_is_not_trusted(tmp_path):
    cache = resolved(_directory(tmp_path / "cache", 0o755))
    os.chown(cache, 12345, -1)
    assert writable_by_others(cache) == f"{cache} belongs to another user (uid 12345)"
