"""Run by ParaView's own Python (pvbatch/pvpython, tests/test_paraview.py): open fields.xdmf with the
default reader (OpenDataFile picks Xdmf3) and the legacy XDMFReader, and save `u` of every time step.

usage: pvbatch paraview_read.py FIELDS_XDMF OUT_NPZ
"""

import sys

import numpy as np
from paraview import servermanager as sm
from paraview import simple
from vtk.util.numpy_support import vtk_to_numpy

path, out = sys.argv[1], sys.argv[2]
found = {}
for label, make in (("default", lambda: simple.OpenDataFile(path)),
                    ("legacy", lambda: simple.XDMFReader(FileNames=[path]))):
    reader = make()
    reader.UpdatePipelineInformation()
    found[f"{label}_reader"] = np.array(type(reader).__name__)
    times = list(reader.TimestepValues or [])
    found[f"{label}_times"] = np.array(times)
    for k, t in enumerate(times):
        reader.UpdatePipeline(t)
        data = sm.Fetch(reader)
        if data.IsA("vtkCompositeDataSet"):
            it = data.NewIterator()
            it.InitTraversal()
            data = it.GetCurrentDataObject()
        array = data.GetPointData().GetArray("u")
        nx, ny, _ = data.GetDimensions()
        if array is not None:
            found[f"{label}_{k}"] = vtk_to_numpy(array).reshape(ny, nx).copy()  # the data goes with `data`
np.savez(out, **found)
