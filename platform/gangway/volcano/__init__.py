"""Volcano's ``batch.volcano.sh/v1alpha1`` Job — the only package that knows Volcano's API
version, field names, phases and defaults. Pod-level Kubernetes types come from Hera's models.

* Writing (:mod:`gangway.volcano.job`): a gang-scheduled PyTorch job is built with
  :func:`pytorch_job` and serialised with :meth:`VolcanoJob.to_manifest`; the Argo resource
  template that creates it lives in :mod:`gangway.pipeline`, with :data:`SUCCESS_CONDITION`,
  :data:`FAILURE_CONDITION` and :data:`JOB_OUTPUTS` from here.
* Reading (:mod:`gangway.volcano.gang`): :func:`read_gang` turns a Job manifest (any, not only
  Gangway's) into a :class:`Gang` — its tasks, pod specs, lifecycle policies, ``maxRetry`` and
  pytorch plugin — for the local gang runner and ``gangway lint``; :func:`gang_problems` is the
  whole-gang rule; :func:`job_object` is the Job as the API returns it once it has a status.

Import from the module that holds a name: ``gangway.volcano.job`` or ``gangway.volcano.gang``.
"""
