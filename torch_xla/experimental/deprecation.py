"""Old names kept working: a deprecated name calls the function that replaced it and logs
one warning, at its first call, naming both (`deprecated`, `mark_deprecated`,
`register_deprecated`)."""
import functools
import importlib
import logging
from typing import Callable, Optional


def deprecated(module, new: Callable, old_name: Optional[str] = None,
               extra_msg: Optional[str] = None) -> Callable:
    """`new` under the name `module.old_name` (default `new`'s own name): a call logs, the
    first time, that the old name is deprecated in favour of `new`, then calls `new`."""
    old_name = old_name or new.__name__
    warned = []

    @functools.wraps(new)
    def wrapper(*args, **kwargs):
        if not warned:
            warned.append(True)
            message = (f"{module.__name__}.{old_name} is deprecated. Use "
                       f"{new.__module__}.{new.__name__} instead.")
            logging.warning(message + (f" {extra_msg}" if extra_msg else ""))
        return new(*args, **kwargs)
    return wrapper


def mark_deprecated(new: Callable, extra_msg: Optional[str] = None):
    """Decorator: the decorated function becomes a deprecated name of `new` (its body is not
    run; calls go to `new`)."""
    def decorator(old):
        return deprecated(importlib.import_module(old.__module__), new, old.__name__, extra_msg)
    return decorator


def register_deprecated(module, new: Callable, extra_msg: Optional[str] = None) -> None:
    """Sets `module.<new's name>` to a deprecated name of `new`."""
    setattr(module, new.__name__, deprecated(module, new, extra_msg=extra_msg))
