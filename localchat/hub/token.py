"""The Hugging Face access token: where it is kept, and asking the hub whose it is.

Gated models (Gemma, Llama) need a token from an account that accepted the
model's licence. The token is stored in huggingface-hub's own token file
(``HF_TOKEN_PATH``, by default ``<HF_HOME>/token``), not in localchat's
settings file, for three reasons: huggingface-hub already reads it on every
request (so downloads pass it without localchat handling it again), the
``hf`` command line and every other tool built on huggingface-hub see the
same login (a user who ran ``hf auth login`` is signed in here too, and the
other way round), and a settings file is something users copy, share and
attach to bug reports while a credential must not travel with it. The file
is written owner-only (0600, its folder 0700 on POSIX), as huggingface-hub
writes it itself. The ``HF_TOKEN`` environment variable, when set, wins over
the file, as in huggingface-hub.

The token is never logged: messages name where it came from, not what it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from localchat.hub.errors import AccessDeniedError, ConnectionLostError, DownloadError

log = logging.getLogger(__name__)

TOKENS_PAGE = "https://huggingface.co/settings/tokens"
ENV_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def token_file() -> Path:
    """huggingface-hub's token file (HF_TOKEN_PATH, else HF_HOME/token)."""
    from huggingface_hub import constants

    return Path(constants.HF_TOKEN_PATH)


def env_token() -> str | None:
    """The token from HF_TOKEN (or the older HUGGING_FACE_HUB_TOKEN), which huggingface-hub prefers."""
    for name in ENV_VARS:
        value = (os.environ.get(name) or "").strip()
        if value:
            return value
    return None


def stored_token() -> str:
    """The token in huggingface-hub's token file; "" when there is none."""
    try:
        return token_file().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def save_token(token: str) -> None:
    """Keep ``token`` in huggingface-hub's token file (owner-only); an empty token removes it.

    Raises DownloadError with a sentence when the file cannot be written.
    """
    token = token.strip()
    path = token_file()
    try:
        if not token:
            path.unlink(missing_ok=True)
            log.info("removed the Hugging Face token from %s", path)
            return
        if any(c.isspace() for c in token):
            raise DownloadError("A Hugging Face access token has no spaces in it; paste it again.")
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(token)
        with contextlib.suppress(OSError, NotImplementedError):  # POSIX modes; Windows keeps its ACLs
            path.chmod(0o600)
        log.info("saved a Hugging Face token to %s", path)
    except OSError as exc:
        raise DownloadError(
            f"The Hugging Face token could not be saved to {path} ({exc.strerror or exc})."
        ) from exc


@dataclass(frozen=True)
class Account:
    """Whose token it is, as the hub's ``whoami`` says."""

    name: str
    role: str = ""  # "read", "write", "fineGrained" when the hub says


def check_token(token: str, endpoint: str | None = None) -> Account:
    """Ask the hub (huggingface-hub's ``whoami``) whose ``token`` is.

    Raises AccessDeniedError when the hub refuses it, ConnectionLostError when
    the hub cannot be reached, DownloadError for anything else: each a sentence.
    """
    from huggingface_hub import HfApi
    from huggingface_hub import errors as hf

    token = token.strip()
    if not token:
        raise AccessDeniedError(f"No token was given; create one at {TOKENS_PAGE} and paste it here.")
    try:
        info = HfApi(endpoint=endpoint).whoami(token=token)
    except hf.HfHubHTTPError as exc:
        status = getattr(exc.response, "status_code", None)
        if status in (401, 403):
            raise AccessDeniedError(
                f"The hub did not accept this token ({status}): it may be mistyped, expired or revoked; "
                f"create a new one at {TOKENS_PAGE}."
            ) from None
        raise DownloadError(
            f"The hub could not check the token (it answered {status}); try again later."
        ) from None
    except Exception as exc:
        client_error = getattr(hf, "HTTPError", ())  # the HTTP client's transport error, re-exported
        if isinstance(exc, client_error | ConnectionError | TimeoutError | OSError):
            from huggingface_hub import constants

            raise ConnectionLostError(
                f"Cannot reach the hub at {endpoint or constants.ENDPOINT} to check the token; "
                "check the connection and try again."
            ) from None
        raise DownloadError(f"The token could not be checked ({type(exc).__name__}).") from None
    auth = info.get("auth") if isinstance(info, dict) else None
    token_info = auth.get("accessToken") if isinstance(auth, dict) else None
    role = str(token_info.get("role", "")) if isinstance(token_info, dict) else ""
    name = str(info.get("name", "")) if isinstance(info, dict) else ""
    return Account(name or "an unnamed account", role)
