"""What a run reports: the environment, verification, the experiment record, the printed summary, reports
and figures (also of bench results). Imports core, backends, parallel, io and bench.
"""
