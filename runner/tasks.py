"""Model domains and tasks, named after TorchBench's (paper Table 1).

A model sets ``task`` to one of these strings; the part before the dot is its
domain, which `run.py --list` shows.
"""


class COMPUTER_VISION:
	CLASSIFICATION = "computer_vision.classification"
	GENERATION = "computer_vision.generation"
	SEGMENTATION = "computer_vision.segmentation"


class NLP:
	LANGUAGE_MODELING = "nlp.language_modeling"


class RECOMMENDATION:
	RECOMMENDATION = "recommendation.recommendation"


class REINFORCEMENT_LEARNING:
	OTHER_RL = "reinforcement_learning.other"


class SPEECH:
	RECOGNITION = "speech.recognition"


class OTHER:
	OTHER_TASKS = "other.other_tasks"


# The paper's six domains, in its order.
DOMAINS = ("computer_vision", "nlp", "recommendation", "reinforcement_learning", "speech", "other")


def domain_of(task):
	return task.split(".", 1)[0]
