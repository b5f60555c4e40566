"""Small Argo Workflows, written in Hera for this project, one feature (or two) each.

Every public module defines one ``Workflow`` named ``w``; ``tests/e2e/local/test_features.py`` runs
each through the local executor and checks that it ends the way Argo would end it. The
templates only run POSIX ``sh`` and ``python``, so locally they are plain host processes.
"""
