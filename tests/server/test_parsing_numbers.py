"""Request bodies' numbers: each one the sampler cannot use is a 400 in OpenAI's shape, naming it."""

from __future__ import annotations

import math

import pytest

from localchat.server.errors import ApiError
from localchat.server.parsing import Limits, parse_chat, parse_completion

MSGS = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("temperature", math.nan),
        ("temperature", math.inf),
        ("temperature", -1),
        ("top_p", math.nan),
        ("top_p", -math.inf),
        ("min_p", math.nan),
        ("repeat_penalty", 0),
        ("repeat_penalty", 0.0),
        ("repeat_penalty", -1),
        ("repeat_penalty", math.nan),
        ("max_tokens", 0),
        ("max_tokens", -3),
        ("top_k", -1),
    ],
)
def test_numbers_the_sampler_cannot_use_are_refused_naming_the_field(key: str, value: float) -> None:
    for parse, body in (
        (parse_chat, {"messages": MSGS, key: value}),
        (parse_completion, {"prompt": "Hi", key: value}),
    ):
        with pytest.raises(ApiError) as caught:
            parse(body, None, Limits(max_tokens=256))  # type: ignore[operator]
        err = caught.value
        assert err.status == 400 and err.param == key and err.code == "invalid_value", err.message
        assert f"'{key}'" in err.message and err.message.endswith(".")
        assert set(err.body()["error"]) == {"message", "type", "param", "code"}


def test_the_edges_clients_send_are_kept() -> None:
    parsed = parse_chat(
        {"messages": MSGS, "temperature": 0, "top_p": 1, "min_p": 0, "repeat_penalty": 1, "top_k": 0,
         "max_tokens": 1, "seed": -1},
        None,
        Limits(max_tokens=256),
    )
    assert parsed.request.max_tokens == 1 and parsed.request.sampling.repeat_penalty == 1.0
    native = parse_completion({"prompt": "Hi", "n_predict": -1}, None, Limits(max_tokens=64), native=True)
    assert native.request.max_tokens == 64  # llama.cpp's -1: until done, within the server's limit
