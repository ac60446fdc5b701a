"""pytorch_unet: U-Net (Ronneberger et al., 2015) for 2-class segmentation
of 3-channel images at 640x960 (TorchBench's Carvana setting at half scale):
four max-pool downsamplings of double 3x3 conv + batch norm + ReLU, four
transposed-conv upsamplings with skip concatenation, a 1x1 classifier;
cross-entropy + soft Dice loss, RMSprop.  Train and eval batch 1.
--small: 64x64 images and 16 base channels instead of 64."""
import torch
from torch import nn
import torch.nn.functional as F

from runner.model import BenchmarkModel
from runner.tasks import COMPUTER_VISION

CLASSES = 2


def double_conv(in_channels, out_channels):
	return nn.Sequential(
		nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False), nn.BatchNorm2d(out_channels), nn.ReLU(True),
		nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False), nn.BatchNorm2d(out_channels), nn.ReLU(True))


class Up(nn.Module):
	def __init__(self, in_channels, out_channels):
		super().__init__()
		self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, 2, stride=2)
		self.conv = double_conv(in_channels, out_channels)

	def forward(self, x, skip):
		x = self.up(x)
		# Odd sizes lose a row/column on the way down: pad back to the skip's size.
		dy, dx = skip.shape[2] - x.shape[2], skip.shape[3] - x.shape[3]
		if dy or dx:
			x = F.pad(x, (dx // 2, dx - dx // 2, dy // 2, dy - dy // 2))
		return self.conv(torch.cat([skip, x], dim=1))


class UNet(nn.Module):
	def __init__(self, width):
		super().__init__()
		w = width
		self.inc = double_conv(3, w)
		self.downs = nn.ModuleList(double_conv(w * 2 ** i, w * 2 ** (i + 1)) for i in range(4))
		self.ups = nn.ModuleList(Up(w * 2 ** (i + 1), w * 2 ** i) for i in reversed(range(4)))
		self.outc = nn.Conv2d(w, CLASSES, 1)

	def forward(self, x):
		skips = [self.inc(x)]
		for down in self.downs:
			skips.append(down(F.max_pool2d(skips[-1], 2)))
		x = skips.pop()
		for up in self.ups:
			x = up(x, skips.pop())
		return self.outc(x)


def soft_dice_loss(logits, target):
	probabilities = logits.softmax(dim=1)
	one_hot = F.one_hot(target, CLASSES).permute(0, 3, 1, 2).to(probabilities.dtype)
	intersection = (probabilities * one_hot).sum(dim=(0, 2, 3))
	total = probabilities.sum(dim=(0, 2, 3)) + one_hot.sum(dim=(0, 2, 3))
	return 1 - ((2 * intersection + 1e-6) / (total + 1e-6)).mean()


class Model(BenchmarkModel):
	task = COMPUTER_VISION.SEGMENTATION
	DESCRIPTION = "U-Net segmentation, 640x960"
	DEFAULT_TRAIN_BSIZE = 1
	DEFAULT_EVAL_BSIZE = 1

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		height, width = (64, 64) if self.small else (640, 960)
		self.model = UNet(16 if self.small else 64).to(self.device)
		self.example_inputs = (torch.randn(self.batch_size, 3, height, width, device=self.device),)
		if test == "train":
			self.masks = torch.randint(0, CLASSES, (self.batch_size, height, width), device=self.device)
			self.optimizer = torch.optim.RMSprop(self.model.parameters(), lr=1e-5, weight_decay=1e-8, momentum=0.9)

	def compute_loss(self, output):
		output = output.float()
		return F.cross_entropy(output, self.masks) + soft_dice_loss(output, self.masks)
