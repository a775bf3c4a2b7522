"""The problem itself (numpy; h5py only to read an initial field): physics (weights, exact modes), decomposition,
initial fields, the padded field, the run's layout, the time loop, timers, errors, machine facts.
Imports nothing from the rest of solver.
"""
