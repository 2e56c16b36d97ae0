"""The retry schedule of the price and Hub clients: exponential backoff with jitter, and a
server's Retry-After honoured up to a cap (the fault tests run without the sleep)."""

import httpx
import pytest
from tenacity import RetryCallState, Retrying

from assets.ingest import hub_client
from assets.prices import http


def _state(attempt: int, exc: BaseException) -> RetryCallState:
    state = RetryCallState(Retrying(), fn=None, args=(), kwargs={})
    state.attempt_number = attempt
    state.set_exception((type(exc), exc, None))
    return state


def _answer(status: int, headers: dict[str, str] | None = None) -> http.RetryableStatus:
    request = httpx.Request("GET", "http://127.0.0.1/prices")
    return http.RetryableStatus(httpx.Response(status, headers=headers, request=request))


@pytest.mark.parametrize("backoff", [http.BACKOFF, hub_client.BACKOFF])
def test_backoff_doubles_from_half_a_second_with_up_to_a_second_of_jitter(backoff):
    """Attempts 1, 2, 3 wait 0.5, 1 and 2 s plus jitter in [0, 1) s (tenacity's
    wait_exponential_jitter: initial x multiplier x 2^(n-1) + U(0, jitter))."""
    for attempt, base in ((1, 0.5), (2, 1.0), (3, 2.0)):
        waits = [backoff(_state(attempt, httpx.ReadTimeout("slow"))) for _ in range(50)]
        assert all(base <= w <= base + 1 for w in waits), (attempt, min(waits), max(waits))
        assert max(waits) - min(waits) > 0.1  # jittered, not fixed


def test_a_retry_after_is_honoured_up_to_a_minute():
    """A 429 with Retry-After waits what the server asked, at most MAX_RETRY_AFTER_S; one
    without it (Vast.ai's) takes the backoff."""
    assert http._wait(_state(1, _answer(429, {"Retry-After": "7"}))) == 7.0
    assert http._wait(_state(1, _answer(429, {"Retry-After": "3600"}))) == 60.0
    assert 0.5 <= http._wait(_state(1, _answer(429))) <= 1.5
