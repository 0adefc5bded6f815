"""Every provider is a ``Provider``: the installed ones are, an entry point naming anything else is
refused when it loads, and what a provider leaves out has its default (no options, no kinds, no
SQL writer: its kinds land in the landing table)."""

from __future__ import annotations

import importlib.metadata

import pytest
from stub_provider import StubProvider

from ferryman_worker import destinations, providers
from ferryman_worker.errors import ConfigurationError
from ferryman_worker.providers import declarative, registry
from ferryman_worker.providers.democrm import DemoCRM

DEMO = ("democrm", "democrm_python")
"""The providers ferryman installs."""


def test_the_installed_providers_are_providers() -> None:
    assert isinstance(providers.load("democrm"), declarative.DeclaredProvider)
    assert isinstance(providers.load("democrm_python"), DemoCRM)
    assert all(isinstance(providers.load(name), providers.Provider) for name in DEMO)


def test_an_entry_point_naming_anything_but_a_provider_is_refused_with_the_fix() -> None:
    entry = importlib.metadata.EntryPoint(
        "odd", "ferryman_worker.errors:ConfigurationError", providers.ENTRY_POINTS
    )
    with pytest.raises(ConfigurationError) as caught:
        registry.loaded(entry)
    assert str(caught.value) == (
        "the provider installed as 'odd' (ferryman_worker.errors:ConfigurationError) is a"
        " type, not a Provider: register an instance of a subclass of"
        " ferryman_worker.providers.Provider"
    )


def test_a_provider_without_options_kinds_or_writer_has_the_defaults() -> None:
    stub = StubProvider()
    assert (stub.options, stub.kinds, stub.writer("notes")) == ({}, {}, None)
    assert providers.options_for(stub, {}) == {}
    with pytest.raises(ConfigurationError, match="'stub' has no option 'region'"):
        providers.options_for(stub, {"region": "eu"})
    assert destinations.writer_for({}, stub, "notes") == destinations.landing("/id")
