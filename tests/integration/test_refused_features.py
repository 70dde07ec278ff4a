# A Kafka feature kafkalite does not serve yet is refused with a broker log line that names
# it, not silently: an API key of an unserved feature (the connection closes, as Kafka does
# for a key it does not know). (Transactional producers were refused here until issue 13.)
from __future__ import annotations

import time

from tests.helpers.kbatch import connect, is_closed
from tests.integration.test_bad_input import _frame, _header


def _log(bp) -> str:
    with open(bp.log_path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _wait_for_line(bp, text: str, timeout: float = 10.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = _log(bp)
        if text in out:
            return out
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the broker log:\n{_log(bp)[-3000:]}")


def test_unserved_api_key_names_its_feature(broker_process):
    # CreateDelegationToken v2, with a flexible header: an empty body is enough,
    # the broker refuses it by key before decoding.
    with connect(broker_process.bootstrap) as s:
        s.sendall(_frame(_header(38, 2) + b"\x00" + b"\x00" * 16))
        assert is_closed(s)
    _wait_for_line(broker_process, "CreateDelegationToken (API key 38) is part of "
                                   "delegation tokens")
