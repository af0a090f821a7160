"""The stable-prefix share: how much of a prompt a provider's prompt cache can reuse."""

from __future__ import annotations

from app.evaluation.prefix import PrefixTracker, extends, stable_prefix_share

A = {"role": "system", "content": "one two three"}
B = {"role": "user", "content": "four five"}
C = {"role": "user", "content": "six"}


def words(text: str) -> int:
    return len(text.split())


def test_a_prompt_that_only_adds_messages_reuses_all_of_the_previous_one() -> None:
    share = stable_prefix_share([A, B], [A, B, C], words)
    sizes = [words(str(m)) for m in (A, B, C)]
    assert share == (sizes[0] + sizes[1]) / sum(sizes)
    assert extends([A, B], [A, B, C])


def test_a_changed_message_ends_the_shared_prefix_there() -> None:
    changed = {**B, "content": "four five!"}
    assert stable_prefix_share([A, B, C], [A, changed, C], words) < stable_prefix_share(
        [A, B], [A, B, C], words
    )
    assert not extends([A, B], [A, changed, C])
    assert stable_prefix_share([B], [A], words) == 0.0


def test_the_tracker_reports_steady_and_offload_turns_apart() -> None:
    tracker = PrefixTracker(words)
    tracker.record([A], offloaded=False)  # the first turn has nothing to reuse
    tracker.record([A, B], offloaded=False)
    tracker.record([A, B, C], offloaded=False)
    tracker.record([C], offloaded=True)
    report = tracker.report()
    assert (report.steady_turns, report.offload_turns) == (2, 1)
    assert report.steady_extending == 1.0 and report.offload_median == 0.0
    assert report.steady_min is not None and 0 < report.steady_min <= report.steady_median  # type: ignore[operator]
