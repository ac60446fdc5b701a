"""mobilenet_v2: torchvision's MobileNetV2 (random weights) on 224x224
images, train batch 96, eval batch 16 as in TorchBench.  --small: 64x64."""
from runner.tasks import COMPUTER_VISION
from runner.vision import TorchVisionModel


class Model(TorchVisionModel):
	task = COMPUTER_VISION.CLASSIFICATION
	DESCRIPTION = "torchvision MobileNetV2, 224x224"
	DEFAULT_TRAIN_BSIZE = 96
	DEFAULT_EVAL_BSIZE = 16
	ARCH = "mobilenet_v2"
