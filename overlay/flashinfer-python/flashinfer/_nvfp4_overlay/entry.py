"""nvfp4-overlay: one routed entry point's declaration (entries.py says what each field means).

Its own module so that entries.py and compile_list.py, which both declare entry points, import it
without importing each other.
"""

from dataclasses import dataclass, field
from typing import Any, Callable, FrozenSet, Mapping, Optional, Tuple

from .codecs import Codec
from .results import Result


@dataclass(frozen=True)
class Entry:
    returns: Optional[str] = None
    fake: Optional[Callable[..., Any]] = None
    inert: FrozenSet[str] = frozenset()
    since: Mapping[str, str] = field(default_factory=dict)
    mutates: FrozenSet[str] = frozenset()
    routes: Mapping[str, FrozenSet[Any]] = field(default_factory=dict)
    codecs: Mapping[str, Codec] = field(default_factory=dict)
    types: Mapping[str, str] = field(default_factory=dict)
    hidden: Mapping[str, Tuple[str, Any]] = field(default_factory=dict)
    when: Optional[Callable[[Mapping[str, Any]], bool]] = None
    variants: Mapping[str, Mapping[Any, str]] = field(default_factory=dict)
    # upstream's decorator sets attributes on its wrapper at call time that the function's body
    # reads back through its module global (backend_requirement's suitable_auto_backends, mm_fp4)
    live_attributes: bool = False

    @property
    def result(self) -> Result:
        return Result(self.returns)

    def result_for(self, values: Mapping[str, Any]) -> Result:
        """What upstream returns for a call with these values (a variant's, else ``returns``)."""
        for name, by_value in self.variants.items():
            if name in values and values[name] in by_value:
                return Result(by_value[values[name]])
        return self.result
