"""Making Argo workflow objects: compiling a pipeline file, CronWorkflows, memoized steps,
GPU pods, provenance parameters and YAML workflow files.
"""
