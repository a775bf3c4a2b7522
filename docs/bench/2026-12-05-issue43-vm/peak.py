"""The hottest point of a chip run: the grid maximum and a biquadratic fit over the 5 x 5 points around it (python peak.py RUN_DIR...)."""
import sys, h5py, numpy as np
def peak(d):
    with h5py.File(d + "/fields.h5") as f:
        u = f["u"][-1]; x = f["x"][:]; y = f["y"][:]
    i, j = np.unravel_index(np.nanargmax(u), u.shape)
    # least-squares biquadratic over the 5x5 block: the max of the fitted surface
    s = slice(i - 2, i + 3), slice(j - 2, j + 3)
    X, Y = np.meshgrid(x[s[1]] - x[j], y[s[0]] - y[i])
    A = np.stack([np.ones(X.size), X.ravel(), Y.ravel(), X.ravel()**2, X.ravel()*Y.ravel(), Y.ravel()**2], 1)
    c = np.linalg.lstsq(A, u[s].ravel(), rcond=None)[0]
    H = np.array([[2*c[3], c[4]], [c[4], 2*c[5]]]); g = -np.linalg.solve(H, c[1:3])
    v = c[0] + c[1:3] @ g + 0.5 * g @ H @ g
    return u[i, j], v, x[j] + g[0], y[i] + g[1]
for d in sys.argv[1:]:
    print(d, "grid max %.5f  fitted peak %.5f at (%.3f, %.3f)" % peak(d))
