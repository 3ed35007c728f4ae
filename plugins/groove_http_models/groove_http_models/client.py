"""POST JSON to a model server: timeouts, bounded retries, errors that name the server.

The standard library's urllib is enough for one JSON request at a time per thread, and it
adds no dependency. Every message names the server by :func:`public_url` (no user, no
password, no query string) and never contains the API key: the key is read from its
environment variable when a request is sent and is scrubbed from any text the server
sends back.
"""

from __future__ import annotations

import base64
import email.utils
import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from groove_http_models.deadline import HTTPHandler, HTTPSHandler

#: Statuses worth retrying: rate limits and a server (or the proxy before it) in trouble.
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
#: Backoff without a Retry-After: 0.5 s, 1 s, 2 s, ... capped at this.
MAX_BACKOFF_SECONDS = 8.0
#: What a user sees of a server's error body: enough for its message, not a page of HTML.
MAX_DETAIL_CHARS = 300


class ServerError(Exception):
    """A request that failed for good; the message names the server (never the key)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


#: An embeddings or rerank answer this large is not one: stop reading instead of filling memory.
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
#: The deepest nesting an answer may have. The APIs' answers need four levels
#: (``{"data": [{"embedding": [...]}]}``, ``{"results": [{"document": {...}}]}``); deeper is
#: refused before parsing, so no answer can exhaust the JSON parser's recursion.
MAX_DEPTH = 8
#: Room in every answer for what is not per item (``model``, ``usage``, ``meta``).
ANSWER_SLACK_BYTES = 64 * 1024
ANSWER_SLACK_TOKENS = 1024
#: Strings and brackets one item (a vector, a score) may bring; the APIs use about ten.
TOKENS_PER_ITEM = 32


@dataclass(frozen=True)
class AnswerLimit:
    """What one answer may cost, set from what its request can need: its bytes (which
    bound the memory of parsing it: about ten times as much at worst), and its strings
    and brackets (which bound the nesting check's walk over it)."""

    max_bytes: int = MAX_RESPONSE_BYTES
    max_tokens: int = MAX_RESPONSE_BYTES
    #: What the request asked for, as the refusal names it ("16 texts of dimension 1024").
    asked: str = "any request"

    @classmethod
    def per_item(cls, items: int, bytes_per_item: int, asked: str) -> AnswerLimit:
        return cls(
            min(MAX_RESPONSE_BYTES, items * bytes_per_item + ANSWER_SLACK_BYTES),
            items * TOKENS_PER_ITEM + ANSWER_SLACK_TOKENS,
            asked,
        )


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """An embeddings POST never needs a redirect, and urllib's handler would re-send every
    header, the Authorization with the API key included, to whatever host the Location
    names (https to http too). A redirect is answered as the HTTP error it came as."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


#: Its HTTP handlers hold the whole request, not each read, to the timeout.
_OPENER = urllib.request.build_opener(_NoRedirects, HTTPHandler, HTTPSHandler)


def public_url(url: str) -> str:
    """``url`` as messages, logs and docs may show it: scheme, host, port and path only."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _split_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@`` (urllib would take it for the host), and
    those credentials for HTTP Basic auth (a proxy in front of a model server)."""
    parts = urlsplit(url)
    if parts.username is None:
        return url, None
    netloc = parts.netloc.rpartition("@")[2]
    pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    plain = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return plain, base64.b64encode(pair.encode()).decode()


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    max_seconds: float = 60.0


@dataclass
class JsonClient:
    """One server. Thread-safe: each call opens its own connection."""

    base_url: str
    timeout: float
    retry: RetryPolicy
    api_key_env: str | None = None
    #: Called before each wait between retries (for the log): (what, seconds).
    on_retry: Callable[[str, float], None] | None = None
    #: Waits between retries; tests pass one that records instead of sleeping.
    sleep: Callable[[float], None] = time.sleep

    @property
    def server(self) -> str:
        return public_url(self.base_url)

    def _key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ServerError(
                f"the API key for {self.server} is read from the environment variable "
                f"{self.api_key_env}, which is not set"
            )
        return key

    def _scrub(self, text: str) -> str:
        """``text`` (a server's error body, which may echo the request) without the API key
        or the password of a ``user:password@`` base URL."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        password = urlsplit(self.base_url).password
        for secret in (key, password and unquote(password), password):
            if secret:
                text = text.replace(secret, "***")
        return text

    def post(self, path: str, payload: dict[str, Any], limit: AnswerLimit | None = None) -> Any:
        """The decoded JSON answer to ``payload`` POSTed at ``base_url + path``, each attempt
        within ``timeout`` from connecting to the answer's last byte, and the answer within
        ``limit``."""
        url, basic = _split_credentials(self.base_url + path)
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self._key()
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        elif basic is not None:
            headers["Authorization"] = f"Basic {basic}"
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return self._once(url, body, headers, limit or AnswerLimit())
            except _Retryable as err:
                wait = err.retry_after if err.retry_after is not None else _backoff(attempt)
                spent = time.monotonic() - started
                if attempt >= self.retry.max_retries or spent + wait > self.retry.max_seconds:
                    tried = f"{attempt + 1} attempt{'s' if attempt else ''}"
                    raise ServerError(
                        f"{err.message} (gave up after {tried} in {spent:.1f} s)", err.status
                    ) from None
                if self.on_retry is not None:
                    self.on_retry(err.message, wait)
                self.sleep(wait)
                attempt += 1

    def _once(self, url: str, body: bytes, headers: dict[str, str], limit: AnswerLimit) -> Any:
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        where = public_url(url)
        too_big = (
            f"{where} answered with more than {limit.max_bytes:,} bytes, more than "
            f"{limit.asked} can need"
        )
        try:
            with _OPENER.open(request, timeout=self.timeout) as response:
                raw = _read(response, limit.max_bytes)
            if raw is None:
                raise ServerError(too_big)
        except urllib.error.HTTPError as err:
            detail = self._scrub(_detail(err.read()))
            message = f"{where} answered HTTP {err.code}: {detail}"
            if err.code in RETRY_STATUSES:
                raise _Retryable(
                    message, err.code, _retry_after(err.headers.get("Retry-After"))
                ) from None
            raise ServerError(message, err.code) from None
        except TimeoutError:
            raise _Retryable(
                f"{where} did not answer within {self.timeout:g} s (timeout)"
            ) from None
        except urllib.error.URLError as err:
            reason = err.reason
            if isinstance(reason, TimeoutError):
                raise _Retryable(
                    f"{where} did not answer within {self.timeout:g} s (timeout)"
                ) from None
            raise _Retryable(f"cannot reach {where}: {reason}") from None
        except (ConnectionError, OSError) as err:  # reset or closed mid-answer
            raise _Retryable(f"cannot reach {where}: {err}") from None
        # JSON between systems is UTF-8 (RFC 8259); json would also read UTF-16 and UTF-32,
        # whose escaped quotes the nesting check below, which walks the bytes, misreads
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ServerError(f"{where} answered with something that is not UTF-8 JSON") from None
        problem = _structure_problem(raw, limit)
        if problem is not None:
            raise ServerError(f"{where} answered with {problem}")
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise ServerError(f"{where} answered with something that is not JSON") from None


def _read(response: Any, max_bytes: int) -> bytearray | None:
    """The body, or None once it is longer than ``max_bytes`` (a Content-Length that says
    so is believed before anything is read)."""
    length = response.headers.get("Content-Length")
    if length is not None and length.strip().isdigit() and int(length) > max_bytes:
        return None
    raw = bytearray()
    while chunk := response.read(min(1 << 16, max_bytes + 1 - len(raw))):
        raw += chunk
        if len(raw) > max_bytes:
            return None
    return raw


#: What the nesting check drops before its walk: the characters of numbers, separators and
#: whitespace, the bulk of a vector answer (dropping them is fast C). None of them can
#: follow a backslash in valid JSON, so strings keep their escapes and their ends.
_NOT_STRUCTURE = b"0123456789.,:+-eE \t\r\n"
#: A JSON string (escapes included) or a bracket: what the walk steps over. Possessive, and
#: a string left open runs to the end of the answer (which json then refuses): a string
#: that had to close rescanned the rest of the answer from every later escaped quote
#: (quadratic: 15 s for 64 KB of ``\"``).
_STRUCTURE = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)
_OPEN = frozenset(b"[{")
_CLOSE = frozenset(b"]}")


def _structure_problem(raw: bytearray, limit: AnswerLimit) -> str | None:
    """Why ``raw`` is refused before parsing: nested deeper than :data:`MAX_DEPTH`, or more
    strings and brackets than the request's items can bring (which bounds this walk)."""
    compact = raw.translate(None, _NOT_STRUCTURE)
    depth = 0
    for count, match in enumerate(_STRUCTURE.finditer(compact)):
        if count >= limit.max_tokens:
            return f"more strings and brackets than {limit.asked} can need"
        first = compact[match.start()]
        if first in _OPEN:
            depth += 1
            if depth > MAX_DEPTH:
                return f"JSON nested more than {MAX_DEPTH} deep (the API needs 4)"
        elif first in _CLOSE:
            depth -= 1
    return None


class _Retryable(Exception):
    def __init__(
        self, message: str, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after


def _backoff(attempt: int) -> float:
    return float(min(0.5 * 2**attempt, MAX_BACKOFF_SECONDS))


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _detail(raw: bytes) -> str:
    """The server's own words: OpenAI-style ``{"error": {"message"}}``, Ollama's and TEI's
    ``{"error": "..."}``, or the start of the body."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data.get("message", data.get("detail")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            text = str(error)
    text = " ".join(text.split())
    return (
        (text[:MAX_DETAIL_CHARS] + "...") if len(text) > MAX_DETAIL_CHARS else text or "(no body)"
    )
