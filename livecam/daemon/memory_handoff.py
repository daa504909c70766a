"""Linux: the kernel's unmapping of the daemon's memory, off the path of its exit.

When a process exits, its last thread unmaps the whole address space before the parent (systemd,
a shell, a test) can see the exit. For ``livecam daemon`` (about 290 MB resident in 1,600
mappings) that is the longest part of a SIGTERM on a saturated 2-core machine: 0.13-2.5 s with
``exit_mmap`` in the kernel stack of the last thread, after the app has stopped in 2-480 ms.
:func:`exit_handing_off_memory` starts a helper task that shares the memory
(``clone(CLONE_VM)``) and only sleeps for a moment, so the daemon's exit leaves the unmapping to
the helper's end. The helper holds no file the daemon had open (every descriptor is closed
first, 0-2 point at ``/dev/null``), so locks, sockets and pipes are released with the daemon's
exit as before; it runs no Python (its one call is libc's ``sleep``) and is reaped by init, or
the nearest subreaper, when it ends.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import NoReturn

_CLONE_VM = 0x00000100
_SIGCHLD = 17
_STACK_BYTES = 64 * 1024


def exit_handing_off_memory(code: int, hold_s: int = 1) -> NoReturn:
    """End the process with ``code`` at once, as ``os._exit`` does, after closing every file
    descriptor (0-2 then read ``/dev/null``) and starting a helper that shares this process's
    memory for ``hold_s`` seconds (where ``clone`` cannot be called, the exit unmaps it as
    usual). Runs no atexit handler and prints nothing. Linux only (elsewhere: ``os._exit``)."""
    if sys.platform != "linux":
        os._exit(code)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        clone, sleep = libc.clone, libc.sleep
    except (OSError, AttributeError):
        os._exit(code)
    # the helper's stack lives in the shared memory; this frame keeps it until the exit
    stack = ctypes.create_string_buffer(_STACK_BYTES)
    top = (ctypes.addressof(stack) + _STACK_BYTES) & ~0xF
    clone.restype = ctypes.c_int
    clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    fn = ctypes.cast(sleep, ctypes.c_void_p)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    clone(fn, ctypes.c_void_p(top), _CLONE_VM | _SIGCHLD, ctypes.c_void_p(max(1, hold_s)))
    os._exit(code)
