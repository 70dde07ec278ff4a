# The hand-written Produce and Fetch response encoders (the hot paths skip kio's pure-Python
# writer) must produce exactly the bytes kio's schema-driven writer produces for the same
# response, at every served version: kio is the reference codec.
from __future__ import annotations

import datetime
import sys
import uuid

import pytest
from kio.schema.errors import ErrorCode as KioError

from kafkalite.broker.build import make
from kafkalite.broker.handlers import fetch, produce
from kafkalite.broker.registry import HANDLERS
from kafkalite.wire.codec import encode, response_class

ZERO = datetime.timedelta(0)
BATCH = bytes(range(70))  # opaque to both encoders: record batches pass through as bytes


def _mod(cls):
    return sys.modules[cls.__module__]


def _versions(key: int) -> range:
    h = HANDLERS[key]
    return range(h.decodable_from, h.max_version + 1)


@pytest.mark.parametrize("version", _versions(1))
def test_fetch_encoder_matches_kio(version):
    tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    key = tid if version >= 13 else "orders"
    parts = [(0, 0, 120, 5, BATCH), (1, 1, 7, 0, b""), (2, 0, 0, 0, b"")]
    ours = b"".join(fetch.encode_response(version, 0, 99 if version >= 7 else 0,
                                          [(key, parts)]))
    cls = response_class(1, version)
    m = _mod(cls)
    pd = [make(m.PartitionData, partition_index=i, error_code=KioError(e), high_watermark=hw,
               last_stable_offset=hw, log_start_offset=start, aborted_transactions=None,
               preferred_read_replica=-1, records=data)
          for i, e, hw, start, data in parts]
    topic = make(m.FetchableTopicResponse, topic=key, topic_id=key, partitions=tuple(pd))
    ref = encode(make(cls, throttle_time=ZERO, error_code=KioError(0),
                      session_id=99 if version >= 7 else 0, responses=(topic,)))
    assert ours == ref


@pytest.mark.parametrize("version", _versions(0))
def test_produce_encoder_matches_kio(version):
    bad = ((3, "Compacted topic cannot accept message without key in topic partition t-3."),
           (13, None))
    results = [("orders", [produce._partition_result(0, 0, 41, -1, 0),
                           produce._partition_result(3, 87, -1, -1, -1,
                                                     "One or more records have been rejected",
                                                     bad)])]
    ours = produce.encode_response(version, results)
    cls = response_class(0, version)
    m = _mod(cls)
    prs = []
    for idx, code, base, append_time, start, message, errors in results[0][1]:
        rec = tuple(make(m.BatchIndexAndErrorMessage, batch_index=i,
                         batch_index_error_message=text) for i, text in errors) \
            if hasattr(m, "BatchIndexAndErrorMessage") else ()
        prs.append(make(m.PartitionProduceResponse, index=idx, error_code=KioError(code),
                        base_offset=base, log_append_time=None,  # None is kio's -1
                        log_start_offset=start, record_errors=rec, error_message=message))
    topic = make(m.TopicProduceResponse, name="orders", partition_responses=tuple(prs))
    ref = encode(make(cls, responses=(topic,), throttle_time=ZERO))
    assert ours == ref
