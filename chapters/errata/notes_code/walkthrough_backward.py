# ruff: noqa
# The First-Principles Walkthrough's NumPy code (its lines 48-76), unchanged.
import numpy as np

Q = np.array([[1.0, 0.0], [0.0, 1.0]])
K = np.array([[1.0, 0.0], [0.0, 1.0]])
V = np.array([[1.0, 2.0], [3.0, 4.0]])
d_k = Q.shape[1]

S = Q @ K.T
S_scaled = S / np.sqrt(d_k)
shifted = S_scaled - S_scaled.max(axis=1, keepdims=True)
expS = np.exp(shifted)
A = expS / expS.sum(axis=1, keepdims=True)
O = A @ V

dO = np.ones_like(O)               # dL/dO for L = sum(O)
dA = dO @ V.T
dV = A.T @ dO
dS_scaled = np.zeros_like(A)
for i in range(A.shape[0]):
    a, da = A[i], dA[i]
    dS_scaled[i] = a * (da - np.sum(a * da))
dS = dS_scaled / np.sqrt(d_k)
dQ = dS @ K
dK = dS.T @ Q

print(np.round(A, 4))          # [[0.6698 0.3302] [0.3302 0.6698]]
print(np.round(O, 4))          # [[1.6605 2.6605] [2.3395 3.3395]]
print(np.round(dS_scaled, 4))  # [[-0.8847 0.8847] [-0.8847 0.8847]]
print(np.round(dS, 4))         # [[-0.6256 0.6256] [-0.6256 0.6256]]
