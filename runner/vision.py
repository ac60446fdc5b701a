"""Shared base of the torchvision classification models, after TorchBench's
TorchVisionModel: random weights (weights=None: no downloads), random
images and labels, cross-entropy, SGD."""
import torch

from runner.model import BenchmarkModel
from runner.tasks import COMPUTER_VISION


class TorchVisionModel(BenchmarkModel):
	task = COMPUTER_VISION.CLASSIFICATION
	ARCH = None            # torchvision.models.<ARCH>
	IMAGE_SIZE = 224
	SMALL_IMAGE_SIZE = 64
	NUM_CLASSES = 1000

	def __init__(self, test, device, batch_size=None, extra_args=[]):
		super().__init__(test=test, device=device, batch_size=batch_size, extra_args=extra_args)
		import torchvision
		self.model = getattr(torchvision.models, self.ARCH)(weights=None, num_classes=self.NUM_CLASSES).to(self.device)
		size = self.SMALL_IMAGE_SIZE if self.small else self.IMAGE_SIZE
		images = torch.randn(self.batch_size, 3, size, size, device=self.device)
		self.example_inputs = (images,)
		if test == "train":
			self.labels = torch.randint(0, self.NUM_CLASSES, (self.batch_size,), device=self.device)
			self.loss_fn = torch.nn.CrossEntropyLoss()
			self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)

	def compute_loss(self, output):
		return self.loss_fn(output.float(), self.labels)
