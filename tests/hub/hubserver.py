"""A small Hugging Face hub stand-in on 127.0.0.1 for download tests.

It answers HEAD and GET on ``/{owner}/{repo}/resolve/{revision}/{filename}``
from a folder laid out as ``root/owner/repo/filename``, with the headers
huggingface-hub reads: X-Repo-Commit, ETag, X-Linked-Etag (the SHA-256 of an
LFS file), X-Linked-Size, Content-Length, Accept-Ranges; Range requests get
206 with Content-Range. Errors carry X-Error-Code like the real hub
(GatedRepo, RepoNotFound, EntryNotFound). Knobs let a test drop the
connection mid-file, slow the body down, or lie about the SHA-256.

Gated repositories behave like the real hub's: ``grants`` maps a repo to the
tokens whose owners accepted its licence; a request without a bearer token
gets 401 GatedRepo, one with another token 403 GatedRepo, one with a granted
token the file. ``GET /api/whoami-v2`` answers for the tokens in ``accounts``
(token -> user name) and 401 for any other, as ``whoami`` expects.

The search API, as ``HfApi.list_models`` and ``model_info`` call it: ``GET /api/models`` with
``search`` (each of its words in the id), ``filter`` (``gguf``: repos with a .gguf file),
``sort=downloads`` and ``limit`` lists the repositories under ``root`` (their downloads and likes
from ``stats``, gated as ``gated`` and ``grants`` say), and
``GET /api/models/{owner}/{repo}`` (``/revision/{rev}`` too; ``blobs=true`` adds sizes) one
repository's files. A gated repo's file list answers like its files do.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

COMMIT = "0123456789abcdef0123456789abcdef01234567"
_PATH_RE = re.compile(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$")


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    authorization: str | None


@dataclass
class HubServer:
    root: Path
    gated: set[str] = field(default_factory=set)  # "owner/repo" answering 401 GatedRepo
    forbidden: set[str] = field(default_factory=set)  # "owner/repo" answering 403
    grants: dict[str, set[str]] = field(default_factory=dict)  # gated "owner/repo" -> tokens let in
    accounts: dict[str, str] = field(default_factory=dict)  # token -> user name, for /api/whoami-v2
    drop_after: dict[str, int] = field(default_factory=dict)  # filename -> bytes sent before the cut (once)
    fake_sha: dict[str, str] = field(default_factory=dict)  # filename -> SHA-256 to advertise instead
    delay_per_block_s: float = 0.0
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)  # repo -> (downloads, likes) for search
    redirect: bool = False  # answer resolve URLs with 302 to a content URL, as the real hub does for LFS
    block: int = 64 * 1024
    requests: list[Request] = field(default_factory=list)
    _sha_cache: dict[Path, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                server._handle(self, head=True)

            def do_GET(self) -> None:
                server._handle(self, head=False)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def add(self, repo: str, filename: str, source: Path | bytes) -> Path:
        """Serve ``source`` (a file, linked, or bytes) as ``repo``/``filename``."""
        dest = self.root / repo / filename
        dest.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, bytes):
            dest.write_bytes(source)
        else:
            dest.symlink_to(source)
        return dest

    def gets(self, filename: str) -> list[Request]:
        return [r for r in self.requests if r.method == "GET" and r.path.endswith("/" + filename)]

    def sha256(self, path: Path) -> str:
        if path not in self._sha_cache:
            h = hashlib.sha256()
            with path.open("rb") as fh:
                while block := fh.read(1 << 20):
                    h.update(block)
            self._sha_cache[path] = h.hexdigest()
        return self._sha_cache[path]

    # -- request handling -----------------------------------------------------

    def _error(self, h: BaseHTTPRequestHandler, status: int, code: str | None, message: str) -> None:
        h.send_response(status)
        if code:
            h.send_header("X-Error-Code", code)
        h.send_header("X-Error-Message", message)
        h.send_header("X-Repo-Commit", COMMIT)
        h.send_header("Content-Length", "0")
        h.end_headers()

    def _whoami(self, h: BaseHTTPRequestHandler) -> None:
        token = (h.headers.get("Authorization") or "").removeprefix("Bearer ")
        name = self.accounts.get(token)
        if name is None:
            return self._error(h, 401, None, "Invalid credentials in Authorization header")
        body = json.dumps({"type": "user", "name": name, "auth": {"accessToken": {"role": "read"}}}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
        return None

    def _json(self, h: BaseHTTPRequestHandler, data: object) -> None:
        body = json.dumps(data).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _repos(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(f"{o.name}/{r.name}" for o in self.root.iterdir() if o.is_dir()
                      for r in o.iterdir() if r.is_dir())

    def _model(self, repo: str, sizes: bool) -> dict[str, object]:
        downloads, likes = self.stats.get(repo, (0, 0))
        files = sorted(p for p in (self.root / repo).rglob("*") if p.is_file())
        siblings: list[dict[str, object]] = []
        for file in files:
            sibling: dict[str, object] = {"rfilename": file.relative_to(self.root / repo).as_posix()}
            if sizes:
                size = file.stat().st_size
                sibling.update(size=size, blobId=hashlib.sha1(str(file).encode()).hexdigest(),
                               lfs={"size": size, "sha256": self.sha256(file), "pointerSize": 134})
            siblings.append(sibling)
        gated = "manual" if repo in self.gated or repo in self.grants else False
        tags = ["gguf"] if any(str(s["rfilename"]).endswith(".gguf") for s in siblings) else []
        return {"id": repo, "_id": repo, "modelId": repo, "sha": COMMIT, "downloads": downloads,
                "likes": likes, "gated": gated, "private": False, "tags": tags, "siblings": siblings}

    def _list_models(self, h: BaseHTTPRequestHandler) -> None:
        query = parse_qs(urlsplit(h.path).query)
        words = (query.get("search") or [""])[0].lower().split()
        wanted = set(query.get("filter", []))
        # As on the hub's site: every word of the search somewhere in the repository's id.
        models = [self._model(r, sizes=False) for r in self._repos() if all(w in r.lower() for w in words)]
        models = [m for m in models if wanted <= set(m["tags"])]  # type: ignore[arg-type]
        if (query.get("sort") or [""])[0] == "downloads":
            models.sort(key=lambda m: -int(m["downloads"]))  # type: ignore[call-overload]
        limit = int((query.get("limit") or ["1000"])[0])
        return self._json(h, models[:limit])

    def _model_info(self, h: BaseHTTPRequestHandler, repo: str) -> None:
        if not (self.root / repo).is_dir():
            return self._error(h, 401, "RepoNotFound", "Repository not found")
        blobs = (parse_qs(urlsplit(h.path).query).get("blobs") or [""])[0].lower() == "true"
        return self._json(h, self._model(repo, sizes=blobs))

    def _handle(self, h: BaseHTTPRequestHandler, head: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        self.requests.append(
            Request("HEAD" if head else "GET", path, h.headers.get("Range"), h.headers.get("Authorization"))
        )
        if path == "/api/whoami-v2" and not head:
            return self._whoami(h)
        if path == "/api/models" and not head:
            return self._list_models(h)
        info = re.match(r"^/api/models/([^/]+/[^/]+?)(?:/revision/[^/]+)?$", path)
        if info and not head:
            return self._model_info(h, info.group(1))
        cdn = re.match(r"^/cdn/([^/]+/[^/]+)/(.+)$", path)
        if cdn:
            return self._serve(h, head, cdn.group(1), cdn.group(2), self.root / cdn.group(1) / cdn.group(2))
        m = _PATH_RE.match(path)
        if not m:
            return self._error(h, 404, None, "Not found")
        owner, name, _revision, filename = m.groups()
        repo = f"{owner}/{name}"
        if repo in self.gated:
            return self._error(h, 401, "GatedRepo", "Access to model is restricted.")
        if repo in self.grants:
            auth = h.headers.get("Authorization")
            if auth is None:
                return self._error(h, 401, "GatedRepo", "Access to model is restricted. Please log in.")
            if auth.removeprefix("Bearer ") not in self.grants[repo]:
                return self._error(h, 403, "GatedRepo", "Access to model is restricted; accept its licence.")
        if repo in self.forbidden:
            return self._error(h, 403, None, "You do not have access to this model")
        if not (self.root / repo).is_dir():
            return self._error(h, 401, "RepoNotFound", "Repository not found")
        file = self.root / repo / filename
        if not file.is_file():
            return self._error(h, 404, "EntryNotFound", "Entry not found")
        if self.redirect:
            h.send_response(302)
            h.send_header("Location", f"{self.url}/cdn/{repo}/{filename}")
            h.send_header("X-Repo-Commit", COMMIT)
            h.send_header("X-Linked-Etag", f'"{self.fake_sha.get(filename) or self.sha256(file)}"')
            h.send_header("X-Linked-Size", str(file.stat().st_size))
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        return self._serve(h, head, repo, filename, file)

    def _serve(self, h: BaseHTTPRequestHandler, head: bool, repo: str, filename: str, file: Path) -> None:
        if not file.is_file():
            return self._error(h, 404, None, "Not found")
        size = file.stat().st_size
        sha = self.fake_sha.get(filename) or self.sha256(file)
        start = 0
        rng = h.headers.get("Range")
        if rng and not head:
            mr = re.match(r"bytes=(\d+)-$", rng)
            if not mr or int(mr.group(1)) >= size:
                h.send_response(416)
                h.send_header("Content-Range", f"bytes */{size}")
                h.send_header("Content-Length", "0")
                h.end_headers()
                return None
            start = int(mr.group(1))
        h.send_response(206 if start else 200)
        h.send_header("X-Repo-Commit", COMMIT)
        h.send_header("ETag", f'"{hashlib.sha1(str(file).encode()).hexdigest()}"')
        h.send_header("X-Linked-Etag", f'"{sha}"')
        h.send_header("X-Linked-Size", str(size))
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(size - start))
        if start:
            h.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        h.end_headers()
        if head:
            return None
        cut = self.drop_after.pop(filename, None)
        sent = 0
        with file.open("rb") as fh:
            fh.seek(start)
            while block := fh.read(self.block):
                if cut is not None and sent + len(block) > cut:
                    h.wfile.write(block[: cut - sent])
                    h.wfile.flush()
                    h.close_connection = True
                    h.connection.shutdown(2)  # the connection drops mid-file
                    return None
                try:
                    h.wfile.write(block)
                except (BrokenPipeError, ConnectionResetError):
                    return None
                sent += len(block)
                if self.delay_per_block_s:
                    time.sleep(self.delay_per_block_s)
        return None
