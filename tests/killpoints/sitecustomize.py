"""Loaded by every Python process started with this folder on ``PYTHONPATH`` (the tests of a first
run killed while it makes its tracking store): with ``WASHEXP_KILL_AT_STATEMENT=N`` the process
kills its whole process group with SIGKILL just before its N-th SQL statement through SQLAlchemy
(MLflow's schema migrations, its first experiment): a kill at a chosen point, the same every run.
With ``WASHEXP_KILL_BEFORE=TEXT`` it does so before the first statement that holds TEXT.
``WASHEXP_COUNT_STATEMENTS=FILE`` appends each process's count of statements to FILE at its exit."""

import os

_at = int(os.environ.get("WASHEXP_KILL_AT_STATEMENT") or 0)
_before_text = os.environ.get("WASHEXP_KILL_BEFORE")
_count_to = os.environ.get("WASHEXP_COUNT_STATEMENTS")

if _at or _before_text or _count_to:
    import atexit
    import signal

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    _seen = [0]

    def _before(_conn, _cursor, statement, *_args, **_kw):
        _seen[0] += 1
        if _seen[0] == _at or (_before_text and _before_text in statement):
            os.killpg(os.getpgid(0), signal.SIGKILL)

    event.listen(Engine, "before_cursor_execute", _before)
    if _count_to:

        def _count():
            with open(_count_to, "a") as fh:
                fh.write(f"{os.getpid()} {_seen[0]}\n")

        atexit.register(_count)
