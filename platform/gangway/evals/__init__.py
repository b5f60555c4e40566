"""Nightly evals: suites as data, what has not been scored yet (found through lineage), and the
comparison with a baseline — decisions as pure functions (:mod:`.suites`, :mod:`.discover`,
:mod:`.compare`, :mod:`.report`) over what :mod:`.store` reads from MLflow."""
