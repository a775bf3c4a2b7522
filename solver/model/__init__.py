"""The scaling model: predicted seconds per step, and its parts, for any rank and node count.

Modules by concern (imports only downwards; solver.cli and solver.sweep use it):
    problem    what is run (the case) and where (ranks, nodes, ranks per node, GPUs): plain data
    schedule   the steps as the solver takes them: batches between stops, time tiles
    network    the link between nodes: presets with sources, a file, or measured
    inputs     the measured inputs (solver.bench.model_probe's cache entry), interpolated
    calibrate  running the probe under a launcher when inputs are missing
    simulate   ranks in lockstep with their neighbours (discrete events; waiting comes out of it)
    predict    the prediction and its parts
    here       `stencil model CASE` on this machine;  sweeps: predictions beside a sweep's points, validation
    text       what `stencil model` prints
docs/scaling_model.md describes the model, its inputs and how it was validated.
"""
