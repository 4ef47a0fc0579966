"""IndexNow against a local HTTP server: batches, JSON, retries, refusals that do not raise."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import ConfigError
from pipeline.notify import publish_indexnow_key, submit_indexnow

HOST = "www.example.com"
KEY = "0123456789abcdef0123"


class Endpoint:
    """An IndexNow endpoint on 127.0.0.1 that answers with scripted statuses (then 200)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.script: list[int] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                endpoint.requests.append({"path": self.path, "headers": dict(self.headers),
                                          "json": json.loads(body)})
                status = endpoint.script.pop(0) if endpoint.script else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/indexnow"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,),
                                       daemon=True)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    e = Endpoint()
    e.thread.start()
    yield e
    e.close()


def urls(n: int) -> list[str]:
    return [f"https://{HOST}/p/{i}" for i in range(n)]


def submit(endpoint: Endpoint, items: Any, **kw: Any) -> dict[str, Any]:
    kw.setdefault("key_location", f"https://{HOST}/{KEY}.txt")
    return submit_indexnow(items, host=HOST, key=KEY, endpoint=endpoint.url, backoff=0.01,
                           timeout=5, **kw)


def test_batches_of_at_most_10000_with_the_protocol_json(endpoint: Endpoint) -> None:
    result = submit(endpoint, iter(urls(25_000)))
    assert [len(r["json"]["urlList"]) for r in endpoint.requests] == [10_000, 10_000, 5_000]
    first = endpoint.requests[0]
    assert first["path"] == "/indexnow"
    assert first["headers"]["Content-Type"] == "application/json; charset=utf-8"
    assert set(first["json"]) == {"host", "key", "keyLocation", "urlList"}
    assert (first["json"]["host"], first["json"]["key"]) == (HOST, KEY)
    assert first["json"]["keyLocation"] == f"https://{HOST}/{KEY}.txt"
    sent = [u for r in endpoint.requests for u in r["json"]["urlList"]]
    assert sent == urls(25_000)
    assert result["submitted"] == 25_000 and result["batches"] == 3
    assert result["failed_batches"] == 0 and result["statuses"] == {"200": 3}


def test_no_key_location_leaves_it_out_and_nothing_to_send_posts_nothing(
        endpoint: Endpoint) -> None:
    submit(endpoint, urls(2), key_location=None)
    assert "keyLocation" not in endpoint.requests[0]["json"]
    assert submit(endpoint, [])["batches"] == 0 and len(endpoint.requests) == 1


def test_429_then_success_is_retried(endpoint: Endpoint) -> None:
    endpoint.script = [429, 503]
    result = submit(endpoint, urls(3))
    assert len(endpoint.requests) == 3
    assert result["submitted"] == 3 and result["retries"] == 2
    assert result["statuses"] == {"200": 1} and result["failed_batches"] == 0


def test_403_is_reported_not_raised_and_stops(endpoint: Endpoint,
                                              caplog: pytest.LogCaptureFixture) -> None:
    endpoint.script = [403]
    with caplog.at_level(logging.WARNING, logger="pipeline.notify"):
        result = submit(endpoint, urls(25), batch_size=10)
    assert len(endpoint.requests) == 1  # a refused key refuses every batch: not retried
    assert result["submitted"] == 0 and result["failed_batches"] == 1
    assert result["failed_urls"] == 10 and result["skipped_urls"] == 15
    assert result["statuses"] == {"403": 1}
    assert any("refused the key (403)" in r.message and r.levelno == logging.WARNING
               for r in caplog.records)


def test_422_fails_its_batch_only(endpoint: Endpoint) -> None:
    endpoint.script = [422]
    result = submit(endpoint, urls(20), batch_size=10)
    assert result["statuses"] == {"422": 1, "200": 1}
    assert (result["submitted"], result["failed_urls"]) == (10, 10)


def test_retries_exhausted_is_a_failure(endpoint: Endpoint) -> None:
    endpoint.script = [500] * 10
    result = submit(endpoint, urls(5), retries=2)
    assert len(endpoint.requests) == 3 and result["failed_batches"] == 1
    assert result["statuses"] == {"500": 1}


def test_unreachable_endpoint_is_reported_not_raised() -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    result = submit_indexnow(urls(2), host=HOST, key=KEY, key_location=None,
                             endpoint=f"http://127.0.0.1:{port}/indexnow", retries=1,
                             backoff=0.01, timeout=2)
    assert result["failed_batches"] == 1 and result["statuses"] == {"None": 1}


def test_off_host_urls_are_left_out(endpoint: Endpoint) -> None:
    result = submit(endpoint, [*urls(2), "https://other.example.org/x"])
    assert endpoint.requests[0]["json"]["urlList"] == urls(2)
    assert result["off_host"] == 1


@pytest.mark.parametrize("kw, message", [
    ({"key": "short"}, "8 to 128"),
    ({"endpoint": "file:///etc/passwd"}, "http"),
    ({"batch_size": 10_001}, "10,000"),
])
def test_bad_settings_are_config_errors(kw: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"host": HOST, "key": KEY, "key_location": None, **kw}
    with pytest.raises(ConfigError, match=message):
        submit_indexnow(urls(1), **args)


def test_publish_indexnow_key(tmp_path: Path) -> None:
    site_root = str(tmp_path / "site")
    uri = publish_indexnow_key(site_root, KEY, None)
    assert Path(uri).read_text() == KEY and Path(uri).name == f"{KEY}.txt"
    # Under an output's public URL, the key location's path below it.
    out = str(tmp_path / "out")
    uri = publish_indexnow_key(out, KEY, "https://www.example.com/sm/keys/k.txt",
                               public_url="https://www.example.com/sm/")
    assert uri == f"{out}/keys/k.txt" and Path(uri).read_text() == KEY
    with pytest.raises(ConfigError, match="not below the output's public URL"):
        publish_indexnow_key(out, KEY, "https://www.example.com/k.txt",
                             public_url="https://www.example.com/sm/")
