"""The provider registry: each drop-in registers itself, and `journaled()` converts a built client
with the drop-in registered for its SDK."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

from pyrula.agents.compat._http import journal_http_client
from pyrula.agents.compat._stainless import (
    Provider,
    drop_in,
    guard_assigned_resources,
    resource_names,
)
from pyrula.runtime.calls import LLMRate

T = TypeVar("T")


# Converts a built client in place and returns it: `convert(client, rate_limit=...)`.
Converter = Callable[..., Any]

_PROVIDERS: list[Provider] = []
_subclasses: dict[type, type] = {}
# Clients the Stainless drop-ins do not subclass (boto3's, google-genai's) are converted by the
# drop-in registered for the SDK module their class comes from; `_HOMES` names the drop-in
# module that registers it, imported when `journaled()` first meets such a client.
_CONVERTERS: dict[str, Converter] = {}
_HOMES: dict[str, str] = {}


def register(provider: Provider, drop_ins: list[tuple[type, type]]) -> None:
    """Declare `provider`'s drop-ins as (SDK class, drop-in class), most derived first."""
    provider.drop_ins[:0] = drop_ins
    if provider not in _PROVIDERS:
        _PROVIDERS.append(provider)


def register_converter(sdk_module: str, convert: Converter) -> None:
    """Declare that `convert` journals a built client whose class comes from `sdk_module`."""
    _CONVERTERS[sdk_module] = convert


def converter_home(sdk_module: str, drop_in_module: str) -> None:
    """Declare which drop-in module registers the converter for `sdk_module`'s clients (imported
    on first use: its SDK is an optional extra)."""
    _HOMES[sdk_module] = drop_in_module


# SDK package -> the drop-in module that registers its provider, imported on first use.
_PROVIDER_HOMES: dict[str, str] = {}


def provider_home(sdk_package: str, drop_in_module: str) -> None:
    """Declare which drop-in module registers the provider of `sdk_package`'s clients; it is
    imported when `journaled()` first meets such a client (so importing one drop-in never
    imports another SDK)."""
    _PROVIDER_HOMES[sdk_package] = drop_in_module


def _import_provider_for(cls: type) -> None:
    for klass in cls.__mro__:
        home = _PROVIDER_HOMES.get(klass.__module__.split(".")[0])
        if home is not None:
            importlib.import_module(home)
            return


def _converter_for(cls: type) -> Converter | None:
    modules = [k.__module__ for k in cls.__mro__]
    for sdk_module, home in _HOMES.items():
        if any(m == sdk_module or m.startswith(f"{sdk_module}.") for m in modules):
            if sdk_module not in _CONVERTERS:
                importlib.import_module(home)
            return _CONVERTERS[sdk_module]
    return None


def _drop_in_for(cls: type) -> tuple[Provider, type]:
    _import_provider_for(cls)
    for provider in _PROVIDERS:
        for sdk_cls, drop_in_cls in provider.drop_ins:
            if cls is sdk_cls:
                return provider, drop_in_cls
    for provider in _PROVIDERS:
        unconverted = [k.__name__ for k in cls.__mro__ if k.__name__ in provider.not_converted]
        if unconverted and cls.__module__.startswith(f"{provider.name}."):
            raise TypeError(
                f"journaled() does not convert {provider.name}.{unconverted[0]} clients yet; "
                "use the provider's direct client, or call it inside `ctx.step`"
            )
        for sdk_cls, _ in provider.drop_ins:
            if issubclass(cls, sdk_cls):
                # A caller's own subclass of an SDK client: journal it as itself.
                if cls not in _subclasses:
                    own = type(cls.__name__, (cls,), {"__module__": cls.__module__})
                    _subclasses[cls] = drop_in(provider)(own)
                return provider, _subclasses[cls]
    known = ", ".join(sorted({f"{p.name}.{s.__name__}" for p in _PROVIDERS for s, _ in p.drop_ins}))
    raise TypeError(
        f"journaled() takes a provider SDK client ({known}), not a {cls.__name__}; pass the "
        "client itself, or construct one from pyrula.agents.compat"
    )


def _patched_by_instructor(client: Any) -> bool:
    if type(client).__module__.split(".")[0] == "instructor":
        return True
    for provider in _PROVIDERS:
        target: Any = client
        for name in provider.instructor_call:
            target = getattr(target, "__dict__", {}).get(name)
        if target is not None and getattr(target, "__module__", "").startswith("instructor"):
            return True
    return False


def journaled(client: T, *, rate_limit: LLMRate | None = None) -> T:
    """Convert a built SDK client (openai or anthropic, any of their clouds) in place, and return
    it: from now on its calls journal inside a run (each live one in a `rate_limit` slot).
    A boto3 `bedrock-runtime` client is journaled in place through botocore's hooks, and a
    `google.genai.Client` as `pyrula.agents.compat.genai.journaled` does."""
    convert = _converter_for(type(client))
    if convert is not None:
        return convert(client, rate_limit=rate_limit)  # type: ignore[no-any-return]
    if _patched_by_instructor(client):
        orders = "; ".join(p.instructor_order for p in _PROVIDERS)
        raise TypeError(
            "journaled() was handed a client instructor has already wrapped, whose calls would "
            f"skip the journal; pass the provider client first: {orders}"
        )
    if getattr(type(client), "_pyrula_journaled", False):
        if rate_limit is not None:
            client._pyrula_rate = rate_limit  # type: ignore[attr-defined]
        return client
    provider, target = _drop_in_for(type(client))
    journal_http_client(client._client, provider.name)  # type: ignore[attr-defined]
    for name in resource_names(type(client)):
        vars(client).pop(name, None)  # resources built before the conversion
    client.__class__ = target
    client._pyrula_rate = rate_limit  # type: ignore[attr-defined]
    guard_assigned_resources(client)
    return client
