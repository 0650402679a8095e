"""``washexp runs``' overrides column: the values each key took over a sweep's arms. Trap guarded:
a list value (``task=[backup,refactor]``) was split at its own commas and its pieces glued to
another key (``model=openai,refactor]``)."""

from __future__ import annotations

from washexp.listing import merged_overrides


def test_a_list_value_stays_whole_and_with_its_key():
    arms = [
        "compaction.task=[backup,refactor],compaction.topn=0,model.name=q,model=openai",
        "compaction.task=[backup,refactor],compaction.topn=1,model.name=q,model=openai",
    ]
    assert merged_overrides(arms) == "compaction.task=[backup,refactor] compaction.topn=0,1 model.name=q model=openai"


def test_values_merge_per_key_in_order_and_escapes_stay():
    assert merged_overrides(["method=S,topn=0", "method=H,topn=0"]) == "method=S,H topn=0"
    assert merged_overrides(["store=[a],x=1", "store=[b,c],x=1"]) == "store=[a],[b,c] x=1"
    assert (
        merged_overrides([r"endpoint.base_url=http\://h\:1/v1,method=S"])
        == r"endpoint.base_url=http\://h\:1/v1 method=S"
    )
    assert merged_overrides(["(defaults)"]) == "(defaults)"
