"""Numbers on the command line: each one the engine cannot use is a sentence naming the option and a
non-zero exit, before any model is loaded (issue 29: `--max-tokens 0` still wrote a token, and NaN
temperatures or a zero repeat penalty were taken)."""

from __future__ import annotations

import pytest

from localchat.cli import main

MODEL = "/nowhere/model.gguf"  # never opened: the options are refused first

CASES = [
    ("generate", "--max-tokens", "0"),
    ("generate", "--max-tokens", "-4"),
    ("generate", "--temp", "nan"),
    ("generate", "--temp", "inf"),
    ("generate", "--temp", "-1"),
    ("generate", "--top-p", "nan"),
    ("generate", "--top-p", "1.5"),
    ("generate", "--min-p", "-0.1"),
    ("generate", "--top-k", "-1"),
    ("generate", "--repeat-penalty", "0"),
    ("generate", "--repeat-penalty", "-2"),
    ("generate", "--repeat-penalty", "nan"),
    ("generate", "--ctx", "0"),
    ("generate", "--threads", "0"),
    ("generate", "--gpu-layers", "-2"),
    ("generate", "--p-min", "nan"),
    ("bench", "--max-tokens", "0"),
    ("bench", "--limit", "-1"),
    ("serve", "--max-tokens", "0"),
    ("serve", "--max-body-mb", "nan"),
    ("serve", "--max-body-mb", "-1"),
    ("serve", "--queue-size", "0"),
    ("serve", "--port", "70000"),
    ("selftest", "--tokens", "0"),
]


@pytest.mark.parametrize(("command", "option", "value"), CASES)
def test_a_number_the_engine_cannot_use_is_a_sentence(
    command: str, option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [command, "--model", MODEL, f"{option}={value}"]
    if command == "generate":
        argv.append("hello")
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's refusal: "error: argument --temp: ..."
        code = exc.code if isinstance(exc.code, int) else 1
    err = capsys.readouterr().err
    assert code != 0
    assert option in err, err
    assert "Traceback" not in err
    assert err.strip().endswith(value) or value in err, err  # the sentence shows what was given
