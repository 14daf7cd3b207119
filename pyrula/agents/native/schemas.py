"""JSON schemas from Python: a tool's arguments from its signature, an output type's shape.

Pydantic (installed with any provider SDK, or `pip install 'pyrula[native]'`) builds the schema of
each annotation and validates structured output; without it, tools whose parameters are plain
`str`/`int`/`float`/`bool`/`list`/`dict` still get a schema.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from pyrula.errors import MissingExtra

_PLAIN: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    list: {"type": "array"},
    dict: {"type": "object"},
}


def _pydantic() -> Any:
    try:
        import pydantic
    except ImportError as exc:
        raise MissingExtra(
            "structured output (or a tool parameter that is not a plain "
            "str/int/float/bool/list/dict)",
            "native",
            (exc.name,),
            needs="pydantic",
        ) from exc
    return pydantic


def annotation_schema(annotation: Any) -> dict[str, Any]:
    if annotation is inspect.Parameter.empty:
        return {}
    if annotation in _PLAIN:
        return dict(_PLAIN[annotation])
    schema: dict[str, Any] = _pydantic().TypeAdapter(annotation).json_schema()
    return schema


def signature_schema(fn: Callable[..., Any], *, skip_first: bool) -> dict[str, Any]:
    """The JSON schema of `fn`'s parameters (its first skipped when it takes a context)."""
    try:
        params = list(inspect.signature(fn, eval_str=True).parameters.values())
    except (NameError, TypeError):
        params = list(inspect.signature(fn).parameters.values())
    if skip_first:
        params = params[1:]
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        properties[param.name] = annotation_schema(param.annotation)
        if param.default is inspect.Parameter.empty:
            required.append(param.name)
    return {"type": "object", "properties": properties, "required": required}


def description_of(fn: Callable[..., Any]) -> str:
    return inspect.cleandoc(fn.__doc__ or "").split("\n\n")[0]


class OutputType:
    """A structured output type (a pydantic model, a TypedDict, a dataclass, ...): its schema,
    and validation of what the model answered."""

    def __init__(self, annotation: Any) -> None:
        self.annotation = annotation
        self._adapter = _pydantic().TypeAdapter(annotation)
        self.schema: dict[str, Any] = self._adapter.json_schema()
        self.validation_error: type[Exception] = _pydantic().ValidationError

    def validate(self, value: Any) -> Any:
        """The parsed value from JSON text or an already decoded object."""
        if isinstance(value, str):
            return self._adapter.validate_json(value)
        return self._adapter.validate_python(value)

    def dump(self, value: Any) -> Any:
        """The value as JSON data: what the journal keeps."""
        return self._adapter.dump_python(value, mode="json")
