"""pyhpc_equation_of_state: the seawater equation-of-state kernel of the
pyhpc benchmarks (from the Veros ocean model) that TorchBench includes: the
derivative with respect to Conservative Temperature of dynamic enthalpy,
dH/dCT(SA, CT, p), from the computationally efficient 48-term rational
expression for density (IOC, SCOR and IAPSO 2010, TEOS-10 manual), over a
large array of ocean points, in float64 as pyhpc does.

dH/dCT = 10^4 * integral_0^p d(specific volume)/dCT dp' (p in dbar), with
specific volume = 1/density = B/A for the two polynomials of the 48-term
expression.  Here both polynomials are written as coefficient x monomial
tables, their CT derivatives come from the same tables, and the pressure
integral is an 8-point Gauss-Legendre quadrature (pyhpc expands the integral
in closed form; the quantity and its elementwise-kernel-heavy character are
the same).

eval: dH/dCT at every point.  train (TorchBench has none for this model): the
adjoint sweep, back-propagating the mean of dH/dCT to the temperature field,
the way a sensitivity study would.  Eval: 2^20 points as in TorchBench;
train: 2^18 points, because the autograd graph keeps every elementwise
intermediate (about 6.6 GB at 2^20 points).
--precision: full precision only (fp32/tf32 mean "no reduction"; the kernel
computes in float64)."""
import numpy as np
import torch

from runner.model import BenchmarkModel
from runner.tasks import OTHER

# The 48 coefficients, in the TEOS-10 order v01..v48.
V = (
	9.998420897506056e2, 2.839940833161907e0, -3.147759265588511e-2, 1.181805545074306e-3,
	-6.698001071123802e0, -2.986498947203215e-2, 2.327859407479162e-4, -3.988822378968490e-2,
	5.095422573880500e-4, -1.426984671633621e-5, 1.645039373682922e-7, -2.233269627352527e-2,
	-3.436090079851880e-4, 3.726050720345733e-6, -1.806789763745328e-4, 6.876837219536232e-7,
	-3.087032500374211e-7, -1.988366587925593e-8, -1.061519070296458e-11, 1.550932729220080e-10,
	1.0e0, 2.775927747785646e-3, -2.349607444135925e-5, 1.119513357486743e-6,
	6.743689325042773e-10, -7.521448093615448e-3, -2.764306979894411e-5, 1.262937315098546e-7,
	9.527875081696435e-10, -1.811147201949891e-11, -3.303308871386421e-5, 3.801564588876298e-7,
	-7.672876869259043e-9, -4.634182341116144e-11, 2.681097235569143e-12, 5.419326551148740e-6,
	-2.742185394906099e-5, -3.212746477974189e-7, 3.191413910561627e-9, -1.931012931541776e-12,
	-1.105097577149576e-7, 6.211426728363857e-10, -1.119011592875110e-10, -1.941660213148725e-11,
	-1.864826425365600e-14, 1.119522344879478e-14, -1.200507748551599e-15, 6.057902487546866e-17,
)

# Monomials SA^(s/2) * CT^t * p^k as (coefficient number, s, t, k).
DENSITY_NUMERATOR = (   # A: v01..v20
	(1, 0, 0, 0), (2, 0, 1, 0), (3, 0, 2, 0), (4, 0, 3, 0),
	(5, 2, 0, 0), (6, 2, 1, 0), (7, 2, 2, 0),
	(8, 3, 0, 0), (9, 3, 1, 0), (10, 3, 2, 0), (11, 3, 3, 0),
	(12, 0, 0, 1), (13, 0, 1, 1), (14, 0, 2, 1), (15, 2, 0, 1), (16, 2, 1, 1),
	(17, 0, 0, 2), (18, 0, 1, 2), (19, 0, 2, 2), (20, 2, 0, 2),
)
DENSITY_DENOMINATOR = (  # B: v21..v48
	(21, 0, 0, 0), (22, 0, 1, 0), (23, 0, 2, 0), (24, 0, 3, 0), (25, 0, 4, 0),
	(26, 2, 0, 0), (27, 2, 1, 0), (28, 2, 2, 0), (29, 2, 3, 0), (30, 2, 4, 0),
	(31, 3, 0, 0), (32, 3, 1, 0), (33, 3, 2, 0), (34, 3, 3, 0), (35, 3, 4, 0),
	(36, 4, 0, 0),
	(37, 0, 0, 1), (38, 0, 1, 1), (39, 0, 2, 1), (40, 0, 3, 1), (41, 2, 0, 1), (42, 2, 1, 1),
	(43, 0, 0, 2), (44, 0, 1, 2), (45, 0, 2, 2), (46, 2, 1, 2),
	(47, 0, 0, 3), (48, 0, 1, 3),
)
DBAR_TO_PA = 1e4
QUADRATURE_POINTS = 8


def polynomial(terms, sa_powers, ct_powers, p_powers, d_dct=False):
	"""Sum of the table's monomials (or of their CT derivatives)."""
	total = None
	for number, s, t, k in terms:
		coefficient = V[number - 1]
		if d_dct:
			if t == 0:
				continue
			coefficient, t = coefficient * t, t - 1
		term = coefficient * ct_powers[t] if t else None
		for factor in (sa_powers[s] if s else None, p_powers[k] if k else None):
			if factor is not None:
				term = factor * (coefficient if term is None else term)
		if term is None:
			term = torch.full_like(ct_powers[1], coefficient)
		total = term if total is None else total + term
	return total


def powers(x, highest):
	result = [None, x]
	for _ in range(highest - 1):
		result.append(result[-1] * x)
	return result


def density(sa, ct, p):
	sa_powers = {2: sa, 3: sa * torch.sqrt(sa), 4: sa * sa}
	ct_powers, p_powers = powers(ct, 4), powers(p, 3)
	return (polynomial(DENSITY_NUMERATOR, sa_powers, ct_powers, p_powers)
		/ polynomial(DENSITY_DENOMINATOR, sa_powers, ct_powers, p_powers))


def dynamic_enthalpy_dct(sa, ct, p):
	sa = torch.clamp(sa, min=0.1)     # as Veros: avoid sqrt(0) and the fresh-water limit
	ct = torch.clamp(ct, min=-12.0)   # the fit blows up below about -15 degC
	sa_powers = {2: sa, 3: sa * torch.sqrt(sa), 4: sa * sa}
	ct_powers = powers(ct, 4)
	nodes, weights = np.polynomial.legendre.leggauss(QUADRATURE_POINTS)
	integral = torch.zeros_like(ct)
	for node, weight in zip(nodes.tolist(), weights.tolist()):
		pressure = p * (0.5 * (node + 1.0))
		p_powers = powers(pressure, 3)
		a = polynomial(DENSITY_NUMERATOR, sa_powers, ct_powers, p_powers)
		b = polynomial(DENSITY_DENOMINATOR, sa_powers, ct_powers, p_powers)
		da = polynomial(DENSITY_NUMERATOR, sa_powers, ct_powers, p_powers, d_dct=True)
		db = polynomial(DENSITY_DENOMINATOR, sa_powers, ct_powers, p_powers, d_dct=True)
		# specific volume v = b / a:  dv/dCT = (db a - b da) / a^2
		integral = integral + weight * (db * a - b * da) / (a * a)
	return DBAR_TO_PA * 0.5 * p * integral


class EquationOfState(torch.nn.Module):
	def forward(self, sa, ct, p):
		return dynamic_enthalpy_dct(sa, ct, p)


class Model(BenchmarkModel):
	task = OTHER.OTHER_TASKS
	DESCRIPTION = "pyhpc seawater EOS: dH/dCT, 48-term TEOS-10 density, float64"
	DEFAULT_TRAIN_BSIZE = 262144
	DEFAULT_EVAL_BSIZE = 1048576
	SUPPORTED_PRECISIONS = ("fp32", "tf32")

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		self.model = EquationOfState()
		n = self.batch_size
		options = dict(dtype=torch.float64, device=self.device)
		salinity = 30.0 + 10.0 * torch.rand(n, **options)         # g/kg
		temperature = -2.0 + 32.0 * torch.rand(n, **options)      # degC
		pressure = 6000.0 * torch.rand(n, **options)              # dbar
		self.example_inputs = (salinity, temperature, pressure)

	def train(self):
		salinity, temperature, pressure = self.example_inputs
		temperature = temperature.detach().requires_grad_(True)
		loss = self.forward_with(salinity, temperature, pressure).mean()
		loss.backward()
		self.temperature_sensitivity = temperature.grad
		return loss.detach()

	def forward_with(self, salinity, temperature, pressure):
		return self.model(salinity, temperature, pressure)
