"""resnet50: torchvision's ResNet-50 (random weights) on 224x224 images,
train batch 32, eval batch 64 as in TorchBench.  --small: 64x64 images."""
from runner.tasks import COMPUTER_VISION
from runner.vision import TorchVisionModel


class Model(TorchVisionModel):
	task = COMPUTER_VISION.CLASSIFICATION
	DESCRIPTION = "torchvision ResNet-50, 224x224"
	DEFAULT_TRAIN_BSIZE = 32
	DEFAULT_EVAL_BSIZE = 64
	ARCH = "resnet50"
