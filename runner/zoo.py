"""Model discovery: every directory models/<name>/ with an __init__.py that
defines a ``Model`` class is a model; there is no registry to edit."""
import difflib
import importlib.util
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.path.join(REPO_ROOT, "models")
# Modules are registered under this prefix so a model directory can never
# shadow (or be shadowed by) an installed package named like it.
MODULE_PREFIX = "tbprof_zoo"


class UnknownModel(LookupError):
	def __init__(self, name, suggestions):
		self.name = name
		self.suggestions = suggestions
		hint = f" (did you mean {', '.join(suggestions)}?)" if suggestions else ""
		super().__init__(f"unknown model '{name}'{hint}; `python run.py --list` shows the zoo")


def list_models():
	names = []
	for entry in sorted(os.listdir(MODELS_DIR)):
		if entry.startswith(("_", ".")):
			continue
		if os.path.isfile(os.path.join(MODELS_DIR, entry, "__init__.py")):
			names.append(entry)
	return names


def load_model_module(name):
	if name not in list_models():
		raise UnknownModel(name, difflib.get_close_matches(name, list_models(), n=3, cutoff=0.5))
	module_name = f"{MODULE_PREFIX}.{name}"
	if module_name in sys.modules:
		return sys.modules[module_name]
	if MODULE_PREFIX not in sys.modules:
		package_spec = importlib.util.spec_from_loader(MODULE_PREFIX, loader=None, is_package=True)
		package = importlib.util.module_from_spec(package_spec)
		package.__path__ = [MODELS_DIR]
		sys.modules[MODULE_PREFIX] = package
	model_dir = os.path.join(MODELS_DIR, name)
	spec = importlib.util.spec_from_file_location(
		module_name, os.path.join(model_dir, "__init__.py"), submodule_search_locations=[model_dir])
	module = importlib.util.module_from_spec(spec)
	sys.modules[module_name] = module
	try:
		spec.loader.exec_module(module)
	except BaseException:
		del sys.modules[module_name]
		raise
	if not hasattr(module, "Model"):
		raise ImportError(f"models/{name}/__init__.py defines no Model class")
	return module


def load_model_class(name):
	return load_model_module(name).Model
