"""A request's JSON body, read within bounds: its size, the time it may take, and how deep it nests.

Every bound answers with a sentence and its status, never a traceback:

- size: more than ``max_bytes`` is a 413 (the guard refuses a declared Content-Length earlier);
- time: a body that has not fully arrived within ``timeout_s`` of the request's start (a client
  sending one byte every few seconds holds a connection and the memory of its half-read body) is a
  408 that closes the connection;
- depth: JSON nested deeper than ``MAX_DEPTH`` is a 400. Python's decoder recurses once per level,
  so 100,000 ``[`` are a RecursionError, which would otherwise be a 500 with a long traceback in the
  log; and no request shape of any API surface nests anywhere near ``MAX_DEPTH`` (a JSON schema for
  structured output is the deepest, a few dozen levels at most).

The depth of a decoded body is measured without recursion, so a body just inside the decoder's limit
costs one pass over its values, not a stack per level.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request

from localchat.server.errors import ApiError, bad_request

MAX_DEPTH = 100  # of arrays and objects in a request body
BODY_TIMEOUT_S = 30.0  # for the whole body, from the request's start


class ClientGone(Exception):
    """The client closed the connection before its body arrived (nobody is left to answer)."""


def too_deep() -> ApiError:
    return bad_request(f"The request body nests arrays or objects more than {MAX_DEPTH} levels deep; "
                       "no request needs that many.", None, "invalid_json")


async def read_body(request: Request, max_bytes: int, timeout_s: float = BODY_TIMEOUT_S) -> bytes:
    """The raw body; ApiError 413 when too large, 408 when it does not arrive within ``timeout_s``."""
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise ApiError(413, f"The request body is larger than {max_bytes} bytes, the most "
                                        "this server accepts.", code="body_too_large")
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, f"The request body did not arrive within {timeout_s:g} seconds (only {size} "
                            "bytes came); send it at once.", code="body_timeout",
                       headers={"Connection": "close"}) from None
    except ClientDisconnect:
        raise ClientGone from None
    return b"".join(chunks)


def depth(value: Any) -> int:
    """How deeply arrays and objects nest in a decoded JSON value (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        level += 1
        if level > deepest:
            deepest = level
            if deepest > MAX_DEPTH:
                return deepest
        stack.extend((child, level) for child in children)
    return deepest


def json_object(raw: bytes) -> dict[str, Any]:
    """``raw`` as a JSON object; ApiError 400 with a sentence when it is not one, or nests too deep."""
    if not raw.strip():
        raise bad_request("The request body is empty; send a JSON object.", None, "invalid_json")
    try:
        body = json.loads(raw)
    except UnicodeDecodeError:
        raise bad_request("The request body is not UTF-8 text.", None, "invalid_json") from None
    except json.JSONDecodeError as exc:
        raise bad_request(f"The request body is not valid JSON ({exc.msg} at line {exc.lineno}, "
                          f"column {exc.colno}).", None, "invalid_json") from None
    except RecursionError:
        raise too_deep() from None
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.", None, "invalid_json")
    if depth(body) > MAX_DEPTH:
        raise too_deep()
    return body
