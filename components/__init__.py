"""Step code for the pipeline spine, run in the container (and locally by ``gangway run``).

Each module is runnable as ``python -m components.<name>`` and importable as a plain Python API:

* :mod:`components.staging`    copy + verify a dataset, build the byte-level corpus, emit its digest
* :mod:`components.training`   DDP trainer launched by torchrun, checkpointing with DCP
* :mod:`components.evaluation` score checkpoints on the validation split, pick the best
* :mod:`components.inference`  per-shard batch inference, each output shard written once

Modules import only what their step needs, so a step process starts fast.
"""
