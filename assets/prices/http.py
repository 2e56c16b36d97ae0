"""One HTTP policy for every price provider: timeouts, retries with backoff, a size cap.

httpx does the transport; tenacity (the well-kept retry library) decides when to try
again: on 429 and 5xx answers and on timeouts and connection errors, with exponential
backoff and jitter, honouring Retry-After when the server sends one (Vast.ai answers
429 without it).
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from tenacity import (
    retry,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

CONNECT_S, READ_S, WRITE_S, POOL_S = 5.0, 20.0, 10.0, 5.0
MAX_ATTEMPTS = 4
# Between attempts without a Retry-After: 0.5, 1, 2 s (at most 20) plus up to 1 s of jitter.
BACKOFF = wait_exponential_jitter(multiplier=0.5, max=20.0)
# The longest Retry-After honoured.
MAX_RETRY_AFTER_S = 60.0
MAX_BODY_BYTES = 8 * 2**20  # the largest recorded price response is well under 1 MiB
USER_AGENT = "llm-sizing (+price refresh)"


class FetchError(RuntimeError):
    """A response that could not be had, with the reason (status, timeout, size)."""


class RetryableStatus(FetchError):
    def __init__(self, response: httpx.Response):
        super().__init__(f"HTTP {response.status_code} from {response.request.url}")
        self.retry_after = response.headers.get("Retry-After")


@dataclass(frozen=True)
class Fetched:
    url: str
    status: int
    body: bytes
    content_type: str


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, RetryableStatus | httpx.TimeoutException | httpx.TransportError)


def _wait(retry_state) -> float:
    exc = retry_state.outcome.exception()
    if isinstance(exc, RetryableStatus) and exc.retry_after and exc.retry_after.isdigit():
        return min(float(exc.retry_after), MAX_RETRY_AFTER_S)
    return BACKOFF(retry_state)


def fetch(client: httpx.Client, method: str, url: str, **kwargs) -> Fetched:
    """The response body, after retries; a FetchError names why it could not be had."""

    @retry(
        retry=retry_if_exception(_retryable),
        wait=_wait,
        stop=stop_after_attempt(MAX_ATTEMPTS),
        reraise=True,
    )
    def attempt() -> Fetched:
        with client.stream(method, url, **kwargs) as response:
            if response.status_code == 429 or response.status_code >= 500:
                raise RetryableStatus(response)
            if response.status_code >= 400:
                raise FetchError(f"HTTP {response.status_code} from {url}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise FetchError(f"{url} sent more than {MAX_BODY_BYTES} bytes")
            return Fetched(
                str(response.url),
                response.status_code,
                bytes(body),
                response.headers.get("content-type", ""),
            )

    try:
        return attempt()
    except httpx.TimeoutException as e:
        raise FetchError(f"timed out after {MAX_ATTEMPTS} attempts: {url}") from e
    except httpx.TransportError as e:
        raise FetchError(f"connection failed after {MAX_ATTEMPTS} attempts: {url} ({e})") from e
    except httpx.HTTPError as e:  # decoding errors, too many redirects...
        raise FetchError(f"{type(e).__name__} from {url}: {e}") from e


def client(read_timeout_s: float | None = None) -> httpx.Client:
    timeout = httpx.Timeout(
        connect=CONNECT_S, read=read_timeout_s or READ_S, write=WRITE_S, pool=POOL_S
    )
    return httpx.Client(timeout=timeout, headers={"User-Agent": USER_AGENT}, follow_redirects=True)
