# Clickstream events, deterministic from a seed, and a reference model of what the streaming
# job must emit for them.
#
# The generator walks simulated users through sessions on a small shop (landing, category,
# search, product, cart, checkout), so per-page counts look like real traffic: many views, some
# clicks, few purchases (a purchase is counted under the page of the product bought). Event
# time advances by 1000/rate ms per event from `start_ms`; an occasional event is "late" (its
# event time pushed back 20–240 s, i.e. sometimes within the 2-minute watermark and sometimes
# beyond it). Optionally a fraction of records is malformed, to exercise the dead-letter path.
# Everything is drawn from one random.Random(seed), so a test can regenerate the exact records
# the generator produced.
#
# The reference model (`expected_page_stats`) replays Spark's micro-batch semantics for an
# append-mode windowed aggregation with a watermark, as implemented in Spark 4.0
# (WatermarkSupport.watermarkExpression and the watermark propagator): a batch's watermark is
# max(event time seen in earlier batches) − delay, never moving back; an input row is dropped
# as late when its window's end <= the *previous* batch's watermark; after aggregating, windows
# whose end <= the current batch's watermark are emitted once and forgotten.
from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from typing import Iterator, Sequence

ACTIONS = ("view", "search", "click", "purchase")
WINDOW_MS = 60_000
WATERMARK_MS = 120_000

CATEGORIES = ("shoes", "jackets", "bags", "watches", "sunglasses", "hats")
PRODUCTS = tuple(f"p{n:03d}" for n in range(1, 13))
SEARCH_TERMS = ("running shoes", "rain jacket", "leather bag", "gift", "sale", "black",
                "waterproof", "kids", "summer hat", "smart watch")
REFERRERS = ("https://www.google.com/", "https://www.bing.com/", "https://news.ycombinator.com/",
             "https://www.facebook.com/", "https://t.co/", "newsletter", "")
USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.5 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like "
    "Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/126.0 Mobile Safari/537.36",
)
SITE = "https://shop.example.com"
MAX_ACTIVE_SESSIONS = 30


@dataclass
class Record:
    """One Kafka record as the generator produces it; `event` is None for a malformed one."""
    key: bytes
    value: bytes
    timestamp_ms: int
    event: dict | None
    late: bool = False


@dataclass
class _Session:
    user_id: str
    session_id: str
    page: str
    user_agent: str
    referrer: str
    cart: str | None = None


@dataclass
class ClickstreamGenerator:
    """Yields `Record`s; the same arguments always give the same records."""
    seed: int = 1
    rate: float = 100.0
    start_ms: int = 0
    users: int = 200
    late_ratio: float = 0.01
    bad_ratio: float = 0.0
    _rng: random.Random = field(init=False, repr=False)
    _sessions: dict[str, _Session] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ValueError("rate must be positive")
        self._rng = random.Random(self.seed)

    def records(self, count: int) -> Iterator[Record]:
        for i in range(count):
            event_time = self.start_ms + int(i * 1000 / self.rate)
            yield self._next(event_time)

    def _uuid(self) -> str:
        return str(uuid.UUID(int=self._rng.getrandbits(128), version=4))

    def _next(self, event_time: int) -> Record:
        rng = self._rng
        late = rng.random() < self.late_ratio
        if late:
            event_time -= rng.randint(20_000, 240_000)
        # Most events continue one of the sessions under way, as on a real site where a
        # visitor clicks several times a minute; the rest start or resume someone else's.
        active = list(self._sessions)
        if active and rng.random() < 0.85:
            user_no = int(rng.choice(active)[1:])
        else:
            user_no = rng.randrange(self.users)
        event = self._step(user_no, event_time)
        key = event["user_id"].encode()
        if rng.random() < self.bad_ratio:
            return Record(key, self._corrupt(event), event_time, None, late)
        return Record(key, json.dumps(event, separators=(",", ":")).encode(), event_time, event,
                      late)

    def _corrupt(self, event: dict) -> bytes:
        kind = self._rng.randrange(4)
        text = json.dumps(event, separators=(",", ":"))
        if kind == 0:
            return text[: len(text) // 2].encode()  # truncated in flight
        if kind == 1:
            return b"\xff\xfebinary garbage"
        if kind == 2:
            return json.dumps({k: v for k, v in event.items() if k != "event_time"}).encode()
        return json.dumps({**event, "action": "hover"}).encode()  # unknown action

    def _step(self, user_no: int, event_time: int) -> dict:
        rng = self._rng
        user_id = f"u{user_no:05d}"
        s = self._sessions.get(user_id)
        if s is None or rng.random() < 0.08:
            landing = rng.choice(["/", "/", f"/category/{rng.choice(CATEGORIES)}",
                                  f"/product/{rng.choice(PRODUCTS)}"])
            s = _Session(user_id, self._uuid(), landing, USER_AGENTS[user_no % len(USER_AGENTS)],
                         rng.choice(REFERRERS))
            self._sessions[user_id] = s
            if len(self._sessions) > MAX_ACTIVE_SESSIONS:  # the oldest visitor has left
                self._sessions.pop(next(iter(self._sessions)))
            return self._event(s, "view", landing, s.referrer, event_time)
        action, page, url = self._transition(s)
        referrer = SITE + s.page
        if action in ("view", "search"):
            s.page = page
        elif action == "click" and page.startswith("/product/"):
            s.cart = page.rsplit("/", 1)[1]  # "add to cart"
        elif action == "purchase":
            self._sessions.pop(user_id, None)  # a purchase ends the session
        return self._event(s, action, page, referrer, event_time, url)

    def _transition(self, s: _Session) -> tuple[str, str, str]:
        """(action, page the event is counted under, url) from where the user is now."""
        rng = self._rng
        r = rng.random()
        page = s.page
        cat = f"/category/{rng.choice(CATEGORIES)}"
        prod = f"/product/{rng.choice(PRODUCTS)}"
        if page == "/checkout":
            if s.cart and r < 0.55:
                # counted under the product bought, so a product's conversion rate is
                # purchases / views of its page
                return "purchase", f"/product/{s.cart}", f"{SITE}/checkout/confirm?item={s.cart}"
            return "view", "/cart", SITE + "/cart"
        if page == "/cart":
            nxt = ("view", "/checkout") if r < 0.55 else (
                ("click", page) if r < 0.7 else ("view", prod))
        elif page.startswith("/product/"):
            nxt = ("click", page) if r < 0.3 else ("view", "/cart") if r < 0.5 else (
                ("view", prod) if r < 0.8 else ("view", cat))
        elif r < 0.25:
            q = rng.choice(SEARCH_TERMS)
            return "search", "/search", f"{SITE}/search?q={q.replace(' ', '+')}"
        else:
            nxt = ("click", page) if r < 0.5 else ("view", prod) if r < 0.8 else ("view", cat)
        return nxt[0], nxt[1], SITE + nxt[1]

    def _event(self, s: _Session, action: str, page: str, referrer: str, event_time: int,
               url: str | None = None) -> dict:
        return {"event_id": self._uuid(), "user_id": s.user_id, "session_id": s.session_id,
                "page": page, "url": url or SITE + page, "action": action, "referrer": referrer,
                "user_agent": s.user_agent, "event_time": event_time}


def window_start(event_time_ms: int, window_ms: int = WINDOW_MS) -> int:
    return event_time_ms - event_time_ms % window_ms


@dataclass
class ModelResult:
    """What the job emits for a sequence of micro-batches, per (window start ms, page)."""
    emitted: dict[tuple[int, str], dict]
    open_windows: dict[tuple[int, str], dict]
    dropped: list[dict]
    watermarks: list[int]


def expected_page_stats(batches: Sequence[Sequence[dict]], window_ms: int = WINDOW_MS,
                        delay_ms: int = WATERMARK_MS) -> ModelResult:
    """Replay Spark's append-mode watermark semantics over `batches` of parsed events.

    Include the no-data batches Spark runs (an empty list) where they happen: one after each
    batch that moved the watermark, when the query is left to run (available-now does so).
    """
    state: dict[tuple[int, str], dict] = {}
    emitted: dict[tuple[int, str], dict] = {}
    dropped: list[dict] = []
    watermarks: list[int] = []
    wm = 0
    max_seen: int | None = None
    for batch in batches:
        late_wm = wm
        if max_seen is not None:
            wm = max(wm, max_seen - delay_ms)
        for e in batch:
            start = window_start(e["event_time"], window_ms)
            if start + window_ms <= late_wm:
                dropped.append(e)
                continue
            c = state.setdefault((start, e["page"]), {"events": 0, "users": set(),
                                                      **{a: 0 for a in ACTIONS}})
            c["events"] += 1
            c[e["action"]] += 1
            c["users"].add(e["user_id"])
        for key in [k for k in state if k[0] + window_ms <= wm]:
            emitted[key] = _finish(state.pop(key))
        times = [e["event_time"] for e in batch]
        if times:
            max_seen = max(times) if max_seen is None else max(max_seen, max(times))
        watermarks.append(wm)
    return ModelResult(emitted, {k: _finish(v) for k, v in state.items()}, dropped, watermarks)


def _finish(c: dict) -> dict:
    views = c["view"]
    return {"events": c["events"], "views": views, "searches": c["search"], "clicks": c["click"],
            "purchases": c["purchase"], "unique_users": len(c["users"]),
            "conversion_rate": (c["purchase"] / views) if views else 0.0}
