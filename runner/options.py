"""Option values shared by run.py and the model base class; no torch import
here, so run.py rejects bad options without loading torch."""
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "amp")
BACKENDS = ("eager", "inductor")
DEFAULT_SEED = 1337
