"""The sentences people read about a Failure: made here, from its kind and facts, and nowhere else.

The window, the API's error bodies and the benchmark dialog word the same
failure for their own reader (``Audience``): the window says the chat is saved
and what the next message does; an API client hears that the engine is being
restarted. Decisions are never taken by reading these sentences back: they
read ``Failure.kind``.
"""

from __future__ import annotations

import enum

from localchat.host.events import Failure, FailureKind


class Audience(enum.Enum):
    WINDOW = "window"  # the chat window: a reply of the user's
    API = "api"  # an HTTP client's request
    BENCH = "bench"  # the benchmark dialog, and `localchat bench`
    CLI = "cli"  # `localchat generate`: the reply so far is on the terminal above


NEXT_MESSAGE = "Your chat is saved; the next message starts a new engine."


def _code(exitcode: int | None) -> str:
    return "exit code unknown" if exitcode is None else f"exit code {exitcode}"


def sentence(failure: Failure, audience: Audience = Audience.WINDOW, *, log_path: str | None = None) -> str:
    """One or two sentences for ``audience`` about ``failure``; ``log_path``: where the engine logs."""
    kind = failure.kind
    window = audience is Audience.WINDOW
    if kind is FailureKind.CONTEXT_EXCEEDED:
        if not failure.needed:
            return failure.detail or "The prompt does not fit in the context window."
        what = "This message" if window else "The prompt"
        text = (f"{what} needs {failure.needed} tokens but the context window holds {failure.n_ctx}, "
                f"with {failure.reserve} kept free for the reply.")
        if window:
            text += (" Shorten the message or the system prompt, or raise the context length in "
                     "Settings.")
        return text
    if kind is FailureKind.ENGINE_DIED:
        if failure.while_loading:
            return (f"The engine stopped while loading the model ({_code(failure.exitcode)}); the file may "
                    "be damaged or too large for this computer's memory.")
        if audience is Audience.BENCH:
            return (f"The benchmark process stopped unexpectedly ({_code(failure.exitcode)}); the results "
                    "so far are kept.")
        if audience is Audience.CLI:
            return (f"The engine stopped unexpectedly ({_code(failure.exitcode)}); what it wrote is kept "
                    "above.")
        if not window:
            return (f"The engine stopped unexpectedly ({_code(failure.exitcode)}) while writing this reply; "
                    "it is being restarted.")
        text = f"The engine stopped unexpectedly ({_code(failure.exitcode)}). {NEXT_MESSAGE}"
        return text + (f" What the engine said is in {log_path}." if log_path else "")
    if kind is FailureKind.HUNG:
        text = f"The engine did not stop within {failure.timeout_s:g} seconds, so it was ended"
        if audience in (Audience.CLI, Audience.BENCH):
            return f"{text}."
        return f"{text}. {NEXT_MESSAGE}" if window else f"{text}; it is being restarted."
    if kind is FailureKind.WORKER_LOST:
        text = f"The worker {failure.worker} stopped answering, so the engine stopped"
        again = "Start the worker again (`localchat worker`), or leave it out of --rpc."
        if failure.while_loading and audience in (Audience.CLI, Audience.BENCH):
            return f"{text} while loading the model. {again}"
        if audience is Audience.CLI:
            return f"{text}; what it wrote is kept above. {again}"
        if audience is Audience.BENCH:
            return f"{text}; the results so far are kept. {again}"
        if window:
            return (f"{text}. {NEXT_MESSAGE[:-1]} (start the worker again, or remove it in "
                    "Settings → Workers).")
        return f"{text}; it is being restarted."
    if kind is FailureKind.LOAD_FAILED:
        return failure.detail or "The model could not be loaded."
    if kind is FailureKind.CANCELLED:
        return "The request was cancelled before it started."
    if kind is FailureKind.NO_MODEL:
        if window:
            return "No model is loaded; choose a model first."
        return "No model is loaded in localchat; choose one in its window."
    if kind is FailureKind.QUEUE_FULL:
        return (f"{failure.waiting} requests are already waiting for the engine; try again in "
                f"{failure.retry_after_s} s.")
    if kind is FailureKind.CLOSED:
        return "The engine is shutting down."
    if kind is FailureKind.INVALID_REQUEST:
        return failure.detail or "The engine cannot answer this request."
    if kind is FailureKind.ENGINE_ERROR:
        return failure.detail or "The engine failed while writing the reply."
    assert kind is FailureKind.INTERNAL
    return "The engine's manager stopped on an internal error (the log has the details); restart localchat."


def dropped_workers_sentence(workers: tuple[str, ...]) -> str:
    """After a worker went away: the model runs on this computer alone for now."""
    names = ", ".join(workers)
    return (f"The worker {names} is gone; the model runs on this computer alone for now "
            "(Settings → Workers to change it).")
