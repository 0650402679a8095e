"""The fourteen-task compaction study: contexts, budgets, ranking, retention, grading.

A condition (``condition.py``) is a task under an arm; ``study.py`` runs an arm's conditions as
MLflow runs. Methods: ``methods.py`` (the table of them), ``method.py`` (what the pipeline needs
of one), ``baselines.py``, H in ``h_native.py``/``h_hermes.py``, plug-ins in ``plugin.py``.
Backends that fill the roles: ``reference.py``, ``openai_roles.py``, ``local_roles.py``. What
``washexp export`` writes and ``washexp compare`` reads: ``records/``.
"""
