"""What a run reports: the environment, verification, the experiment record, the printed summary, reports
and figures. Imports core, backends, parallel and io.
"""
