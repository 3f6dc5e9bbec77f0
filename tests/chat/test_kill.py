"""History survives ``kill -9`` of the process writing it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from localchat.chat import ConversationStore

WRITER = textwrap.dedent(
    """
    import sys
    from localchat.chat import ConversationStore

    store = ConversationStore(sys.argv[1])
    conv = store.create("Written before the kill")
    print("conv", conv.id, flush=True)
    i = 0
    while True:  # runs until killed
        store.add_message(conv.id, "user", f"question {i}")
        reply = store.add_message(conv.id, "assistant", "", complete=False)
        store.update_message(reply.id, content=f"partial {i}")
        print("partial", reply.id, i, flush=True)
        store.update_message(reply.id, content=f"answer {i}", complete=True, stats={"i": i})
        print("done", reply.id, i, flush=True)
        i += 1
    """
)


def test_data_survives_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "chats.sqlite3"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert child.stdout is not None
    lines = []
    try:
        for line in child.stdout:
            lines.append(line.split())
            if len(lines) >= 40:
                break
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=10)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL

    conv_id = int(lines[0][1])
    with ConversationStore(path) as store:
        messages = {m.id: m for m in store.messages(conv_id)}
        assert store.get(conv_id).title == "Written before the kill"
    for kind, reply_id, i in lines[1:]:
        message = messages[int(reply_id)]
        if kind == "done":
            assert message.content == f"answer {i}" and message.complete and message.stats == {"i": int(i)}
        else:
            assert message.content in (f"partial {i}", f"answer {i}")
