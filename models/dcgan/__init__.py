"""dcgan: the DCGAN generator/discriminator pair (Radford et al., 2016) on
64x64 RGB images: transposed-convolution generator from a 100-d noise
vector, strided-convolution discriminator, batch norm, N(0, 0.02) init, Adam
(2e-4, betas 0.5/0.999).  One training iteration is one discriminator step
(real + fake) and one generator step; eval generates a batch of images.
Train batch 32, eval batch 256.  --small: 16 base channels instead of 64."""
import torch
from torch import nn

from runner.model import BenchmarkModel
from runner.tasks import COMPUTER_VISION

NOISE_DIM = 100


def generator(width):
	return nn.Sequential(
		nn.ConvTranspose2d(NOISE_DIM, width * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(width * 8), nn.ReLU(True),
		nn.ConvTranspose2d(width * 8, width * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 4), nn.ReLU(True),
		nn.ConvTranspose2d(width * 4, width * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 2), nn.ReLU(True),
		nn.ConvTranspose2d(width * 2, width, 4, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(True),
		nn.ConvTranspose2d(width, 3, 4, 2, 1, bias=False), nn.Tanh())


def discriminator(width):
	return nn.Sequential(
		nn.Conv2d(3, width, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
		nn.Conv2d(width, width * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 2), nn.LeakyReLU(0.2, inplace=True),
		nn.Conv2d(width * 2, width * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 4), nn.LeakyReLU(0.2, inplace=True),
		nn.Conv2d(width * 4, width * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(width * 8), nn.LeakyReLU(0.2, inplace=True),
		nn.Conv2d(width * 8, 1, 4, 1, 0, bias=False), nn.Flatten())


def dcgan_init(module):
	if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d)):
		nn.init.normal_(module.weight, 0.0, 0.02)
	elif isinstance(module, nn.BatchNorm2d):
		nn.init.normal_(module.weight, 1.0, 0.02)
		nn.init.zeros_(module.bias)


class Model(BenchmarkModel):
	task = COMPUTER_VISION.GENERATION
	DESCRIPTION = "DCGAN generator + discriminator, 64x64"
	DEFAULT_TRAIN_BSIZE = 32
	DEFAULT_EVAL_BSIZE = 256

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		width = 16 if self.small else 64
		self.generator = generator(width).to(self.device)
		self.discriminator = discriminator(width).to(self.device)
		self.generator.apply(dcgan_init)
		self.discriminator.apply(dcgan_init)
		self.model = self.generator
		noise = torch.randn(self.batch_size, NOISE_DIM, 1, 1, device=self.device)
		self.example_inputs = (noise,)
		if test == "train":
			self.real_images = torch.rand(self.batch_size, 3, 64, 64, device=self.device) * 2 - 1
			self.loss_fn = nn.BCEWithLogitsLoss()
			self.real_labels = torch.ones(self.batch_size, 1, device=self.device)
			self.fake_labels = torch.zeros(self.batch_size, 1, device=self.device)
			betas = (0.5, 0.999)
			self.g_optimizer = torch.optim.Adam(self.generator.parameters(), lr=2e-4, betas=betas)
			self.d_optimizer = torch.optim.Adam(self.discriminator.parameters(), lr=2e-4, betas=betas)

	def modules_to_cast(self):
		return [self.generator, self.discriminator]

	def _post_init(self):
		super()._post_init()
		self.discriminator.train(self.test == "train")
		if self.test == "train" and self.precision in ("fp16", "bf16"):
			self.real_images = self.real_images.to(self.example_inputs[0].dtype)

	def apply_backend(self):
		# A training step uses both networks, not self.model alone.
		self.generator = torch.compile(self.generator, backend="inductor")
		self.discriminator = torch.compile(self.discriminator, backend="inductor")
		self.model = self.generator

	def train(self):
		noise = torch.randn_like(self.example_inputs[0])
		self.d_optimizer.zero_grad(set_to_none=True)
		with self.autocast():
			fake = self.generator(noise)
			d_loss = (self.loss_fn(self.discriminator(self.real_images).float(), self.real_labels)
				+ self.loss_fn(self.discriminator(fake.detach()).float(), self.fake_labels))
		d_loss.backward()
		self.d_optimizer.step()
		self.g_optimizer.zero_grad(set_to_none=True)
		with self.autocast():
			g_loss = self.loss_fn(self.discriminator(fake).float(), self.real_labels)
		g_loss.backward()
		self.g_optimizer.step()
		return (d_loss + g_loss).detach()
