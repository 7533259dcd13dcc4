"""Print the KV cache events a real vLLM still holds for replay, one JSON object a line.

Run with vLLM's own interpreter (it imports vLLM, ZeroMQ and msgspec, which the governor's
environment lacks): ``python kv_events_replay.py ipc:///…/kv-replay``. The server must run with
``--kv-events-config`` naming that ``replay_endpoint``; it answers a request for events from
sequence number 0 with every batch it still buffers (10,000 steps by default), then an end
marker.

Each line is ``{"stored": [hash, …], "parent": hash | null, "tokens": [id, …]}`` for a block
chain the engine cached, or ``{"removed": [hash, …]}`` for cached blocks it evicted, in the
engine's own order (a step's events in the order the scheduler made them). Hashes are written
as strings. The events come from the engine's scheduler, not from its HTTP front end, so their
order does not depend on how soon the front end hands answers over.
"""

from __future__ import annotations

import json
import sys

import msgspec
import zmq
from vllm.distributed.kv_events import BlockRemoved, BlockStored, KVEventBatch

END_SEQ = (-1).to_bytes(8, "big", signed=True)
TIMEOUT_MS = 20_000


def _name(block_hash: object) -> str:
    return block_hash.hex() if isinstance(block_hash, bytes) else str(block_hash)


def main(endpoint: str) -> None:
    context = zmq.Context()
    replay = context.socket(zmq.DEALER)
    replay.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    replay.setsockopt(zmq.LINGER, 0)
    replay.connect(endpoint)
    replay.send_multipart((b"", (0).to_bytes(8, "big")))
    decoder = msgspec.msgpack.Decoder(KVEventBatch)
    while True:
        _, _, sequence, payload = replay.recv_multipart()
        if sequence == END_SEQ:
            break
        for event in decoder.decode(payload).events:
            if isinstance(event, BlockStored):
                parent = event.parent_block_hash
                line = {
                    "stored": [_name(h) for h in event.block_hashes],
                    "parent": None if parent is None else _name(parent),
                    "tokens": list(event.token_ids),
                }
            elif isinstance(event, BlockRemoved):
                line = {"removed": [_name(h) for h in event.block_hashes]}
            else:
                continue
            print(json.dumps(line))
    replay.close()
    context.term()


if __name__ == "__main__":
    main(sys.argv[1])
