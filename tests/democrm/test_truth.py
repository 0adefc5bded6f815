"""The ground truth: the endpoint and the command agree, and it is fast at benchmark sizes."""

import time

from tests.democrm.server_fixture import DemoCRM, run_truth_command

BENCHMARK = {"organizations": 400_000, "people": 155_000, "deals": 30_788}


def test_the_truth_command_prints_what_the_endpoint_returns(shared_democrm: DemoCRM) -> None:
    truth = shared_democrm.truth()
    assert shared_democrm.truth_command() == truth
    assert truth["dataset"]["organizations"] == shared_democrm.options["organizations"]
    assert set(truth) == {"dataset", "organizations", "people", "deals", "messages"}


def test_ids_can_be_left_out(shared_democrm: DemoCRM) -> None:
    truth = shared_democrm.truth(ids=False)
    assert set(truth["people"]) == {"count", "malformed"}
    assert truth["people"]["count"] == shared_democrm.options["people"]


def test_the_truth_for_the_benchmark_sizes_takes_seconds_not_minutes() -> None:
    began = time.monotonic()
    truth = run_truth_command(seed=3, **BENCHMARK)
    elapsed = time.monotonic() - began
    assert truth["organizations"]["ids"][-1] == 400_000
    assert truth["people"]["count"] == 155_000 and truth["deals"]["count"] == 30_788
    assert 0.005 < len(truth["organizations"]["malformed"]) / 400_000 < 0.015
    assert elapsed < 15
