"""A series key hashes once, and a key sent to another process is that process's key."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

from daemon.sources.samples import SeriesKey, labels_of

# Run in a child with another PYTHONHASHSEED: unpickles keys from stdin and says whether
# each is found in a dict of keys the child built itself.
_CHILD = """
import pickle, sys
from daemon.sources.samples import SeriesKey, labels_of
keys = pickle.load(sys.stdin.buffer)
own = {SeriesKey(key.name, labels_of(dict(key.labels))): True for key in keys}
print(all(own.get(key, False) for key in keys))
"""


def test_equal_keys_hash_alike_and_find_each_other() -> None:
    labels = {"instance": "main", "le": "0.5"}
    first = SeriesKey("vllm_ttft_seconds_bucket", labels_of(labels))
    second = SeriesKey("vllm_ttft_seconds_bucket", labels_of(dict(reversed(labels.items()))))
    other = SeriesKey("vllm_ttft_seconds_bucket", labels_of({**labels, "le": "1.0"}))
    assert first == second
    assert hash(first) == hash(second)
    assert {first: 1}[second] == 1
    assert first != other
    assert other not in {first: 1}


def test_a_key_pickled_to_another_process_is_found_among_its_own_keys() -> None:
    # The what-if worker gets series snapshots by pickle; strings hash differently there.
    keys = [
        SeriesKey("vllm_num_requests_running", labels_of({"instance": f"sim-{n}"}))
        for n in range(8)
    ]
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    answer = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=pickle.dumps(keys),
        capture_output=True,
        env=env,
        check=True,
    )
    assert answer.stdout.decode().strip() == "True"
