"""A lane's wake-ups: credits and draining are state, and a claim that found nothing while
jobs were announced looks again."""

from __future__ import annotations

from ferryman_worker.lanespec import LaneSpec
from ferryman_worker.queue.lanes import Lane


def _idle_lane(width: int = 3) -> Lane:
    lane = Lane(LaneSpec("default", width))
    assert lane.found_nothing(lane.generation)  # the start's drain found nothing
    return lane


def test_a_claim_that_found_nothing_with_nothing_announced_lets_the_thread_sleep() -> None:
    lane = _idle_lane()
    lane.wake(1)
    assert lane.should_claim()
    seen = lane.generation
    assert lane.found_nothing(seen)
    assert not lane.should_claim()


def test_a_claim_that_found_nothing_while_jobs_were_announced_claims_again() -> None:
    """Three jobs announced one by one to three threads: the first thread's claim began after
    the first announcement, found the first job locked by a thread woken for the second (which
    took it) and predates the third in its snapshot; the third thread took the second job. The
    credits are spent: the first thread must look again, or the third job waits for the poll."""
    lane = _idle_lane()
    lane.wake(1)
    assert lane.should_claim()  # thread A, for job 1
    seen = lane.generation
    lane.wake(1)
    assert lane.should_claim()  # thread B, for job 2: takes job 1, which A could not lock
    lane.wake(1)
    assert lane.should_claim()  # thread C, for job 3: takes job 2
    assert not lane.found_nothing(seen)  # A's claim: nothing. Job 3 is left: A claims again
    assert not lane.should_claim()  # no credit is left for anyone else
