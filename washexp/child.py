"""A server child process that cannot outlive washexp.

:func:`module_command` runs a Python module's ``__main__`` (``llama_cpp.server``, ``uvicorn``)
behind a watchdog thread that blocks on the child's stdin, a pipe only the parent holds (start
it with ``stdin=subprocess.PIPE``). When the parent dies, even by SIGKILL, which runs no
cleanup, the pipe closes and the child exits at once (with its process group, for a launcher
that starts a server of its own): no orphan server either way.
"""

from __future__ import annotations

PROGRAM = """\
import os, runpy, signal, sys, threading, time
def _watch():
    # at EOF the parent is gone (or closed the pipe to stop us). os.read, not sys.stdin: a daemon
    # thread blocked in a buffered read holds its lock, and a child that ends in order (a server
    # stopped by SIGTERM) then aborts at shutdown ("Fatal Python error: _enter_buffered_busy")
    while os.read(0, 65536):
        pass
    if {group!r}:  # the child leads a process group: its own children end with it
        os.killpg(0, signal.SIGTERM)
        time.sleep(10)  # reached only if the group has not ended in order
        os.killpg(0, signal.SIGKILL)
    os._exit(0)
threading.Thread(target=_watch, name="washexp-parent-watch", daemon=True).start()
sys.argv[0] = {module!r}
runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
"""


def module_command(
    python: str, module: str, args: list[str], ignored: tuple[str, ...] = (), group: bool = False
) -> list[str]:
    """``python -m module args``, watched: the child ends when the parent's end of its stdin closes.
    ``ignored``: warning filters (``-W`` values) for what the child's own imports raise. ``group``:
    the child is started as a process group's leader (``start_new_session=True``) and starts
    children of its own (``mlflow server`` runs uvicorn): the watch ends the whole group, SIGTERM
    first and SIGKILL 10 s later."""
    program = PROGRAM.format(module=module, group=group)
    return [python, *(f"-W{w}" for w in ignored), "-c", program, *args]


def printable(command: list[str]) -> str:
    """The command for a log line, without the watchdog's program text."""
    at = command.index("-c") + 1 if "-c" in command else None
    return " ".join(c for i, c in enumerate(command) if i != at)
