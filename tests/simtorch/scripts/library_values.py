"""What simgpu's library stand-ins compute, against PyTorch on the CPU (tests/simtorch/libraries.py runs
this under simtorch).  Kernels compute nothing on simgpu, so every input reaches its library call by copies
only: matrices are made column-major on the host (`fortran`), which PyTorch's linalg hands to cuSOLVER as
they are, and only what the library itself writes is compared.  Prints one line per check:
"ok NAME err" or "FAIL NAME ...", then "done"."""
import sys

import torch

torch.manual_seed(0)
failures = 0


def fortran(t):
    """t on the device, column-major (a view of a transposed copy): no kernel needed to lay it out."""
    return t.mT.contiguous().cuda().mT


def wide(t):
    t = t.detach().cpu()
    return t.to(torch.complex128) if t.is_complex() else t.double()


def check(name, got, want, tol=1e-4):
    global failures
    err = (wide(got) - wide(want)).abs().max().item()
    ok = err <= tol * max(1.0, wide(want).abs().max().item())
    failures += not ok
    print("%s %-24s %.3g" % ("ok" if ok else "FAIL", name, err), flush=True)


# cuBLAS level 1: dot and the ops PyTorch runs on it
a, b = torch.randn(37), torch.randn(37)
ac, bc = a.cuda(), b.cuda()
check("dot", torch.dot(ac, bc), torch.dot(a, b))
check("vdot", torch.vdot(ac, bc), torch.vdot(a, b))
check("inner", torch.inner(ac, bc), torch.inner(a, b))
check("matmul_vectors", ac @ bc, a @ b)
check("strided_dot", torch.dot(ac[:36:3], bc[1::3]), torch.dot(a[:36:3], b[1::3]))

# cuSOLVER
n = 6
spd = torch.randn(n, n)
spd = spd @ spd.T + n * torch.eye(n)
L, info = torch.linalg.cholesky_ex(fortran(spd))
check("cholesky_info", info, torch.tensor(0))
check("cholesky", L.cpu().tril(), torch.linalg.cholesky(spd), 1e-5)
check("eigvalsh", torch.linalg.eigvalsh(fortran(spd)), torch.linalg.eigvalsh(spd))
for shape in ((7, 4), (4, 7)):
    m = torch.randn(*shape)
    check("svdvals_%dx%d" % shape, torch.linalg.svdvals(fortran(m)), torch.linalg.svdvals(m))
    a_qr, tau = torch.geqrf(fortran(m))
    a_cpu, tau_cpu = torch.geqrf(m)
    check("geqrf_%dx%d" % shape, a_qr, a_cpu)
    check("geqrf_tau_%dx%d" % shape, tau, tau_cpu)
    check("qr_q_%dx%d" % shape, torch.linalg.qr(fortran(m))[0], torch.linalg.qr(m)[0])
# LU solve: cuSOLVER's getrf/getrs (PyTorch takes cuBLAS's batched path, whose pointer arrays a kernel
# fills, for small matrices).
torch.backends.cuda.preferred_linalg_library("cusolver")
n = 64
A, B = torch.randn(n, n) + n * torch.eye(n), torch.randn(n, 3)
X, info = torch.linalg.solve_ex(fortran(A), fortran(B))
check("solve_info", info, torch.tensor(0))
check("solve", X, torch.linalg.solve(A, B))
LU, piv, info = torch.linalg.lu_factor_ex(fortran(A))
LU0, piv0 = torch.linalg.lu_factor(A)
check("lu_factor", LU, LU0)
check("lu_pivots", piv, piv0)

# LDL^T solve with LAPACK's Bunch-Kaufman pivots (2x2 blocks, interchanges) as the CPU makes them, through
# cusolverDnXsytrs itself: PyTorch's ldl_solve converts its pivots with a kernel, so on simgpu they never
# reach the library.
import ctypes
solver = ctypes.CDLL("libcusolver.so.12")
handle = ctypes.c_void_p()
assert solver.cusolverDnCreate(ctypes.byref(handle)) == 0
n = 6
S = torch.randn(n, n, dtype=torch.float64)
S = S + S.T
S[0, 0] = S[1, 1] = 0.0  # makes LAPACK take a 2x2 pivot
LD, piv = torch.linalg.ldl_factor(S)  # lower, LAPACK's dsytrf
assert (piv < 0).any(), piv
LDf = LD.mT.contiguous().mT.clone()  # column-major, as cuSOLVER reads it
piv64 = piv.to(torch.int64).contiguous()
B = torch.randn(n, 2, dtype=torch.float64)
X = B.mT.contiguous().mT.clone()
info = ctypes.c_int(-1)
CUBLAS_FILL_MODE_LOWER, CUDA_R_64F = 0, 1
st = solver.cusolverDnXsytrs(handle, CUBLAS_FILL_MODE_LOWER, ctypes.c_int64(n), ctypes.c_int64(2), CUDA_R_64F,
                             ctypes.c_void_p(LDf.data_ptr()), ctypes.c_int64(n), ctypes.c_void_p(piv64.data_ptr()),
                             CUDA_R_64F, ctypes.c_void_p(X.data_ptr()), ctypes.c_int64(n), None, ctypes.c_size_t(0),
                             None, ctypes.c_size_t(0), ctypes.byref(info))
check("sytrs_status", torch.tensor([st, info.value]), torch.tensor([0, 0]))
check("sytrs_2x2_pivots", X, torch.linalg.solve(S, B), 1e-9)
# The general eigenproblem (cusolverDnXgeev, float: W as 2n reals, VR real as LAPACK lays them out), called
# directly: PyTorch turns W into complex numbers with a kernel.
n = 7
G = torch.randn(n, n)
Gf = G.mT.contiguous().mT.clone()
W = torch.zeros(2 * n)
VR = torch.zeros(n, n).mT.contiguous().mT.clone()
CUDA_R_32F, NOVECTOR, VECTOR = 0, 0, 1
st = solver.cusolverDnXgeev(handle, None, NOVECTOR, VECTOR, ctypes.c_int64(n), CUDA_R_32F, ctypes.c_void_p(Gf.data_ptr()),
                            ctypes.c_int64(n), CUDA_R_32F, ctypes.c_void_p(W.data_ptr()), CUDA_R_32F, None,
                            ctypes.c_int64(1), CUDA_R_32F, ctypes.c_void_p(VR.data_ptr()), ctypes.c_int64(n),
                            CUDA_R_32F, None, ctypes.c_size_t(0), None, ctypes.c_size_t(0), ctypes.byref(info))
check("geev_status", torch.tensor([st, info.value]), torch.tensor([0, 0]))
w = torch.complex(W[:n], W[n:]).to(torch.complex128)
V = torch.complex(VR, torch.zeros_like(VR)).to(torch.complex128)
j = 0
while j < n:  # a conjugate pair's vector: its real and imaginary columns
    if W[n + j] != 0:
        re, im = VR[:, j].double(), VR[:, j + 1].double()
        V[:, j], V[:, j + 1] = torch.complex(re, im), torch.complex(re, -im)
        j += 2
    else:
        j += 1
ref = torch.linalg.eigvals(G.double())
key = lambda z: (z.real * 1e3).round() * 1e4 + z.imag  # sort by real part, then imaginary
check("geev_values", w[torch.argsort(key(w))], ref[torch.argsort(key(ref))], 1e-4)
check("geev_vectors", G.double().to(torch.complex128) @ V, V * w, 1e-4)
solver.cusolverDnDestroy(handle)

# torch.optim.LBFGS on the device: its two-loop recursion calls cublasSdot; a few steps must run.
model = torch.nn.Linear(8, 1).cuda()
x, y = torch.randn(32, 8).cuda(), torch.randn(32, 1).cuda()
opt = torch.optim.LBFGS(model.parameters(), max_iter=4, history_size=3)


def closure():
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for _ in range(3):
    opt.step(closure)
torch.cuda.synchronize()
print("ok lbfgs_steps 3", flush=True)
print("done")
sys.exit(1 if failures else 0)
