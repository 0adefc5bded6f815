"""What a run chooses of its provider, checked against what the provider declares: the kinds it
imports, in the provider's phases (``phases_for``), and the options it gives
(``options_for``). Each refusal is a ConfigurationError naming the run's field and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers.model import Provider


def options_for(provider: Provider, given: Mapping[str, str]) -> dict[str, Any]:
    """``spec.source.options`` checked against the options ``provider`` declares and typed, the
    defaults filled in; ConfigurationError, one line per problem, naming each field."""
    declared = provider.options
    problems = [
        f"spec.source.options.{name}: {provider.name!r} has no option {name!r}"
        f" (it has: {', '.join(sorted(declared)) or 'none'})"
        for name in sorted(set(given) - set(declared))
    ]
    found: dict[str, Any] = {}
    for name, option in sorted(declared.items()):
        text = given.get(name, option.default)
        if text is None:
            problems.append(f"spec.source.options.{name}: required by {provider.name!r}; give it")
            continue
        try:
            found[name] = _typed(option.type, text)
        except ValueError:
            problems.append(f"spec.source.options.{name}: must be {option.type}; got {text!r}")
    if problems:
        raise ConfigurationError("\n".join(problems))
    return found


def _typed(kind: str, text: str) -> Any:
    if kind == "integer":
        return int(text)
    if kind == "number":
        return float(text)
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise ValueError(text)
        return text.lower() == "true"
    return text


def phases_for(provider: Provider, kinds: list[str]) -> list[list[str]]:
    """The provider's phases restricted to ``kinds`` (all when empty), empty phases dropped.

    A tree kind needs its parent kind in the run: ConfigurationError otherwise.
    """
    wanted = set(kinds) if kinds else set(provider.kinds)
    unknown = wanted - set(provider.kinds)
    if unknown:
        raise ConfigurationError(
            f"spec.kinds: {sorted(unknown)} not provided by {provider.name!r}; name only the"
            f" provider's kinds, {sorted(provider.kinds)} (or leave spec.kinds out for all)"
        )
    for name in wanted:
        parent = provider.kinds[name].parent
        if parent is not None and parent not in wanted:
            raise ConfigurationError(
                f"spec.kinds: {name!r} is walked from {parent!r}: add {parent!r} to the kinds"
            )
    phases = [[k for k in phase if k in wanted] for phase in provider.phases]
    return [phase for phase in phases if phase]
