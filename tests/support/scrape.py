"""Reading a real process's ``GET /metrics``: fetched over HTTP, parsed with prometheus_client's
own parser, as ``{(sample name, labels): value}``; shared by the worker's and the operator's
metrics tests (and the API server's 429s in tests/k8s/test_kubernetes_source.py)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> tuple[str, Samples]:
    """The exposition's text and its samples."""
    response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    return response.text, parse(response.text)


def parse(text: str) -> Samples:
    """The samples of a Prometheus text exposition (any process's, kube-apiserver's too)."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name, frozenset(sample.labels.items())] = sample.value
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def has(samples: Samples, name: str, **labels: str) -> bool:
    wanted = set(labels.items())
    return any(n == name and wanted <= ls for (n, ls) in samples)


def by(samples: Samples, name: str, label: str, **labels: str) -> dict[str, float]:
    """``name``'s samples whose labels include ``labels``, summed by ``label``'s value."""
    wanted = set(labels.items())
    found: dict[str, float] = {}
    for (n, ls), value in samples.items():
        if n == name and wanted <= ls:
            key = dict(ls)[label]
            found[key] = found.get(key, 0.0) + value
    return found
