"""The engine process writes its own log, llama.cpp's reasons included, to the file the app names."""

from __future__ import annotations

from pathlib import Path

from localchat.engine.types import EngineConfig
from localchat.host.events import Failed, FailureKind
from localchat.host.protocol import Load

from .processes import engine_process


def test_a_failed_load_leaves_llama_cpps_reason_in_the_engine_log(tmp_path: Path, smollm2_path: Path) -> None:
    broken = tmp_path / "cut.gguf"
    with smollm2_path.open("rb") as src:
        broken.write_bytes(src.read(4_000_000))  # the header is whole, the tensors are not
    log_path = tmp_path / "log" / "engine.log"
    log_path.parent.mkdir()
    proc = engine_process(log_path=str(log_path))
    try:
        proc.send(Load(EngineConfig(str(broken), n_ctx=256)))
        reply = proc.receive(120)
        assert isinstance(reply, Failed) and reply.failure.kind is FailureKind.LOAD_FAILED, reply
    finally:
        proc.stop()
    text = log_path.read_text(encoding="utf-8")
    assert "engine process started" in text
    assert "load failed" in text
    # A line from llama.cpp itself (through its log callback), not only localchat's summary.
    assert any("localchat.engine.llama" in line and ("ERROR" in line or "WARNING" in line)
               for line in text.splitlines()), text[-2000:]
