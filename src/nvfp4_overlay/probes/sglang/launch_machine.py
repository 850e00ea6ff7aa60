"""What the launch-line probe stands in for, so that a release's own argument handling runs on a CPU.

Each stand-in is named here and reported (``STUBBED``):

- ``transformers`` (the environment's own is never imported): ``AutoConfig.from_pretrained`` and
  ``PretrainedConfig`` read the model directory's config.json as transformers does for a config of
  no known class: each key an attribute, the composite configs' sub-configs (``text_config`` and
  kin) configs of their own, transformers' defaults for the keys a config always has; a config class
  SGLang registers with ``AutoConfig.register`` is built from the same dictionary where its
  model_type is asked, unless it extends one of transformers' own classes (a stand-in here); ``GenerationConfig.from_pretrained`` finds no file (SGLang proceeds without);
  the rest of the package is the permissive stand-in of probes/sglang/sglang_imports.py;
- the GPU's memory: ``get_nvgpu_memory_capacity`` (nvidia-smi in a process upstream) answers the
  faked GPU's memory in MiB, and ``torch.cuda.mem_get_info`` its bytes; the capability, name and
  count are sglang_machine.FakeGpu's;
- a process started (SGLang asking a tool) is refused while the probe runs (an audit hook).
- the model registry is read from the tree, not imported: each ``models/*.py``'s ``EntryClass``.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import json
import os
import sys
from typing import Any

from nvfp4_overlay.probes.sglang.sglang_imports import STUBBED, Stub, StubModule

SUB_CONFIGS = ("text_config", "vision_config", "audio_config", "thinker_config", "talker_config", "llm_config",
               "language_config")
# transformers' PretrainedConfig sets these on every config (its __init__'s keywords with their defaults).
DEFAULTS: dict[str, Any] = {"architectures": None, "torch_dtype": None, "is_encoder_decoder": False,
                            "tie_word_embeddings": True, "bos_token_id": None, "eos_token_id": None,
                            "pad_token_id": None, "return_dict": True, "output_hidden_states": False,
                            "output_attentions": False, "use_return_dict": True, "tokenizer_class": None,
                            "task_specific_params": None, "problem_type": None, "_name_or_path": ""}
# Memory a GPU of the family has (GiB), as nvidia-smi reports memory.total: the server's defaults follow it.
MEMORY_GIB = {(9, 0): 80, (10, 0): 180, (12, 0): 96, (12, 1): 128}


class PretrainedConfig:
    """transformers.PretrainedConfig as far as SGLang's argument handling reads one."""

    model_type = ""
    sub_configs: dict[str, Any] = {}
    attribute_map: dict[str, str] = {}

    def __init__(self, **kwargs: Any) -> None:
        for key, value in {**DEFAULTS, **kwargs}.items():
            if key in SUB_CONFIGS and isinstance(value, dict):
                value = PretrainedConfig(**value)
            try:
                setattr(self, key, value)
            except AttributeError:  # a property of a subclass
                pass
        if "dtype" not in kwargs:
            self.dtype = self.torch_dtype

    def __getattr__(self, name: str) -> Any:
        mapped = type(self).attribute_map.get(name)
        if mapped and mapped != name:
            return getattr(self, mapped)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def to_dict(self) -> dict[str, Any]:
        return {k: v.to_dict() if isinstance(v, PretrainedConfig) else v for k, v in vars(self).items()}

    def to_diff_dict(self) -> dict[str, Any]:
        return self.to_dict()

    def get_text_config(self, decoder: bool = False, **kwargs: Any) -> Any:
        for key in ("text_config", "llm_config", "language_config", "thinker_config"):
            if isinstance(vars(self).get(key), PretrainedConfig):
                return vars(self)[key]
        return self

    def update(self, values: dict[str, Any]) -> None:
        for key, value in values.items():
            setattr(self, key, value)

    def __contains__(self, key: str) -> bool:
        return key in vars(self)

    @classmethod
    def from_dict(cls, config: dict[str, Any], **kwargs: Any) -> Any:
        return cls(**{**config, **{k: v for k, v in kwargs.items() if k != "return_unused_kwargs"}})

    @classmethod
    def get_config_dict(cls, path: Any, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        return read_config(path), {}

    @classmethod
    def from_pretrained(cls, path: Any, **kwargs: Any) -> Any:
        return AutoConfig.from_pretrained(path, **kwargs)


class AutoConfig:
    """transformers.AutoConfig: the config.json of a local directory (no hub, no download)."""

    registered: dict[str, Any] = {}

    @classmethod
    def register(cls, model_type: str, config: Any, exist_ok: bool = False) -> None:
        cls.registered[model_type] = config

    @classmethod
    def from_pretrained(cls, path: Any, trust_remote_code: bool = False, revision: Any = None, **kwargs: Any) -> Any:
        config = read_config(path)
        extra = {k: v for k, v in kwargs.items() if not k.startswith("_") and k not in ("return_unused_kwargs",
                                                                                        "gguf_file", "token")}
        made = cls.registered.get(str(config.get("model_type")), PretrainedConfig)
        if not (isinstance(made, type) and issubclass(made, PretrainedConfig)) or any(
                isinstance(base, type) and issubclass(base, Stub) for base in made.__mro__):
            made = PretrainedConfig  # a class built over a stand-in (a transformers config class SGLang extends)
        try:
            out = made(**{**config, **extra})
        except Exception:  # noqa: BLE001 - a registered class wanting more than the file: the generic config
            out = PretrainedConfig(**{**config, **extra})
        out._name_or_path = str(path)  # type: ignore[attr-defined]
        return (out, {}) if kwargs.get("return_unused_kwargs") else out

    @classmethod
    def for_model(cls, model_type: str, **kwargs: Any) -> Any:
        return PretrainedConfig(model_type=model_type, **kwargs)


class GenerationConfig:
    @classmethod
    def from_pretrained(cls, path: Any, **kwargs: Any) -> Any:
        msg = f"{path}: no generation_config.json (the launch-line probe reads config.json only)"
        raise FileNotFoundError(msg)


def read_config(path: Any) -> dict[str, Any]:
    file = os.path.join(os.fspath(path), "config.json")
    with open(file, encoding="utf-8") as handle:
        return dict(json.load(handle))


_KNOWN = {"PretrainedConfig": PretrainedConfig, "PreTrainedConfig": PretrainedConfig, "AutoConfig": AutoConfig,
          "GenerationConfig": GenerationConfig, "__version__": "4.57.1"}
_CONFIGS: dict[str, type] = {}


class TransformersModule(StubModule):
    """transformers or one of its modules: the names above, any ``*Config`` class a PretrainedConfig of
    that name (transformers' per-model configs, which SGLang's own config classes extend), the rest
    permissive."""

    def __getattr__(self, name: str) -> Any:
        if name in _KNOWN:
            return _KNOWN[name]
        if name.endswith("Config") and name[:1].isupper():
            return _CONFIGS.setdefault(name, type(name, (PretrainedConfig,), {"__module__": "transformers"}))
        return super().__getattr__(name)


class _TransformersFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "transformers" and not fullname.startswith("transformers."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        module = TransformersModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: Any) -> None:
        pass


def transformers_stand_in() -> None:
    """transformers and its modules: TransformersModule (the environment's own is never imported)."""
    sys.modules.pop("transformers", None)
    sys.meta_path.insert(0, _TransformersFinder())
    STUBBED["transformers"] = ("the launch-line probe's: AutoConfig and PretrainedConfig read config.json, every "
                               "*Config a PretrainedConfig, GenerationConfig finds none; the rest permissive")


def gpu_memory(torch: Any, capability: tuple[int, int], sglang_modules: dict[str, Any]) -> int:
    """The faked GPU's memory where SGLang asks for it; the MiB it answers."""
    mib = MEMORY_GIB.get(capability, 80) * 1024
    torch.cuda.mem_get_info = lambda device=None: (mib << 20, mib << 20)
    for module in sglang_modules.values():
        if hasattr(module, "get_nvgpu_memory_capacity"):
            module.get_nvgpu_memory_capacity = lambda: float(mib)
    STUBBED["nvidia-smi"] = f"get_nvgpu_memory_capacity answers the faked GPU's {mib} MiB (no process)"
    return mib


def refuse_processes() -> None:
    """No process starts while the probe runs: SGLang's argument handling asks no tool of this machine."""

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in ("subprocess.Popen", "os.system", "os.posix_spawn", "os.exec"):
            msg = f"the launch-line probe starts no process ({event} {str(args[:2])[:200]})"
            raise RuntimeError(msg)

    sys.addaudithook(hook)


def registry(tree_sglang: str) -> dict[str, str]:
    """The release's model registry as its ModelRegistry builds it: each models/ module's EntryClass
    (a class or a list of them), read from the file; architecture -> module."""
    out: dict[str, str] = {}
    models = os.path.join(tree_sglang, "srt", "models")
    for root, _, files in os.walk(models):
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                try:
                    module = ast.parse(handle.read())
                except SyntaxError:
                    continue
            for node in module.body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EntryClass" for t in node.targets):
                    values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                    for value in values:
                        if isinstance(value, ast.Name):
                            out.setdefault(value.id, os.path.relpath(path, os.path.dirname(tree_sglang)))
    return out


def field_site(sglang_dir: str, name: str) -> dict[str, Any]:
    """Where ServerArgs declares a field (server_args.py, or 0.5.20's arg_groups/fields/): file, line, text."""
    top = os.path.dirname(sglang_dir) + os.sep
    candidates = [os.path.join(sglang_dir, "srt", "server_args.py")]
    for root, _, files in os.walk(os.path.join(sglang_dir, "srt", "arg_groups")):
        candidates += [os.path.join(root, f) for f in sorted(files) if f.endswith(".py")]
    for path in candidates:
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        for number, text in enumerate(lines, start=1):
            if text.strip().startswith(name + ":"):
                return {"file": path[len(top):].replace(os.sep, "/"), "line": number, "text": text.strip()[:200]}
    return {}
