"""Import agent sessions from the formats agents already write into a compaction task set.

One module per format (``openai``, ``claude_code``, ``atif``, ``mlflow_traces``, ``otlp``) turns a file into
:class:`~washexp.sessions.session.Session` values through one
:class:`~washexp.sessions.session.Builder`; ``planting`` weaves graded facts into a session's own
tool results, ``named`` checks the facts a user names; ``writer`` masks secrets and writes the
set whole or not at all; ``cli`` is ``washexp import``.
"""
