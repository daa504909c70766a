"""The ``triton`` engine backend: a model that runs on NVIDIA Triton Inference Server.

:class:`TritonEngine` implements the :class:`~livecam.engines.protocol.Engine` seam, so the swap
keeps its own preprocessing, alignment and paste-back here and only the model call goes over
gRPC: the aligned crops and source latents as float16 (batch first), the swapped crops back as
float16. Bytes per face for inswapper_128: 98,304 (crop) + 1,024 (latent) up, 98,304 down.

Start: ``open`` tries ``urls`` (from a random one, so many livecam processes spread over the
servers) until one is ready and serves the model with the same sha256 as the local file, for at
most ``connect_timeout_s``; otherwise :class:`EngineUnavailableError` in one line.
While streaming: a request that fails or misses its deadline marks the server down and raises
:class:`EngineUnavailableError` (the swap stage then treats the faces of that frame as
unswappable, never sending them as they are); later requests fail at once, without waiting,
while a background thread probes the servers (the failed one first, then the others) with
exponential backoff and switches to the first that is ready again. ``health()`` reports the
state for ``status``, ``/metrics`` and ``doctor``. There is never a fallback to a local engine.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import numpy as np

from livecam.core.backoff import Backoff
from livecam.core.errors import ConfigError, DependencyError, EngineUnavailableError, ModelError
from livecam.engines.protocol import EngineBase, TensorSpec, check_feeds

log = logging.getLogger(__name__)

#: How long past its deadline a request may stay unanswered before the client gives up on it
#: itself: gRPC enforces the deadline (``client_timeout``) and calls back; this only guards
#: against a callback that never comes.
_GRACE_S = 5.0


def _grpc_client() -> Any:
    try:
        import tritonclient.grpc as grpcclient
    except ImportError as exc:
        raise DependencyError("engine.backend is triton but the Triton client is not installed: "
                              "pip install 'livecam[triton]'") from exc
    return grpcclient


def _short(error: BaseException) -> str:
    """One line from a gRPC/Triton error (their texts can span lines)."""
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:200]


class TritonEngine(EngineBase):
    """A model served by Triton at one of ``urls`` (gRPC ``host:port``).

    ``run`` may be called by one thread at a time (the pipeline thread); ``submit`` may be
    called from any thread and returns a future, so several requests can be in flight, and
    ``result`` reads a submitted request's outputs from any thread. ``health`` may be called
    from any thread; it counts the requests in flight now and the most there have been.
    """

    backend = "triton"

    def __init__(self, model_name: str, *, model_sha256: str = "",
                 urls: Sequence[str] = ("localhost:8001",), timeout_ms: int = 500,
                 connect_timeout_s: float = 10.0, reconnect_initial_s: float = 0.25,
                 reconnect_max_s: float = 4.0, first_url: int | None = None) -> None:
        if not urls:
            raise ConfigError("advanced.engine.triton_urls is empty: name at least one Triton "
                              "server (host:port of its gRPC endpoint)")
        self.model_name = model_name
        self.model_sha256 = model_sha256
        self.urls = tuple(urls)
        self.timeout_s = timeout_ms / 1000
        self.connect_timeout_s = connect_timeout_s
        self.reconnect_initial_s = reconnect_initial_s
        self.reconnect_max_s = reconnect_max_s
        self._index = random.randrange(len(self.urls)) if first_url is None else first_url
        self._lock = threading.Lock()
        self._client: Any = None
        self._state = "closed"
        self._last_error = ""
        self._counts = {"requests": 0, "failures": 0, "reconnects": 0, "bytes_sent": 0,
                        "bytes_received": 0, "rows": 0, "in_flight": 0, "in_flight_max": 0}
        self._rtt_ms: deque[float] = deque(maxlen=1000)
        self.max_batch: int | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._prober: threading.Thread | None = None

    @property
    def url(self) -> str:
        return self.urls[self._index]

    # -- start and stop ------------------------------------------------------------------

    def open(self) -> None:
        if self._state != "closed":
            return
        grpc = _grpc_client()
        deadline = time.monotonic() + self.connect_timeout_s
        reasons: dict[str, str] = {}
        while True:
            for k in range(len(self.urls)):
                index = (self._index + k) % len(self.urls)
                client, why = self._probe(grpc, index, check=True)
                if client is not None:
                    with self._lock:
                        self._client, self._index, self._state = client, index, "ready"
                    self._stop.clear()
                    self._prober = threading.Thread(target=self._probe_loop, daemon=True,
                                                    name=f"livecam-triton-{self.model_name}")
                    self._prober.start()
                    log.info("%s runs on the Triton server at %s", self.model_name, self.url)
                    return
                reasons[self.urls[index]] = why
            if time.monotonic() >= deadline:
                break
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
        said = "; ".join(f"{url}: {why}" for url, why in reasons.items())
        raise EngineUnavailableError(
            f"no Triton server serves {self.model_name} ({said}): start one with `livecam "
            "engines serve`, or set advanced.engine.triton_urls to where one runs")

    def _probe(self, grpc: Any, index: int, *, check: bool = False) -> tuple[Any, str]:
        """(a connected client, "") or (None, why not). ``check`` also reads the model's
        inputs/outputs and compares its sha256 with the local file's (a mismatch raises)."""
        url = self.urls[index]
        client = None
        try:
            client = grpc.InferenceServerClient(url=url)
            timeout = max(self.timeout_s, 1.0)
            if not client.is_server_ready(client_timeout=timeout):
                raise RuntimeError("server not ready")
            if not client.is_model_ready(self.model_name, client_timeout=timeout):
                raise RuntimeError(f"model {self.model_name} not ready there")
            if check:
                self._read_model(client, url, timeout)
            return client, ""
        except ModelError:
            raise
        except Exception as exc:  # gRPC and Triton raise their own untyped errors
            if client is not None:
                client.close()
            return None, _short(exc)

    def _read_model(self, client: Any, url: str, timeout_s: float) -> None:
        config = client.get_model_config(self.model_name, as_json=True,
                                         client_timeout=timeout_s)["config"]
        served = config.get("parameters", {}).get("sha256", {}).get("string_value", "")
        if self.model_sha256 and served and served != self.model_sha256:
            raise ModelError(
                f"the Triton server at {url} serves {self.model_name} with sha256 "
                f"{served[:12]}…, this machine has {self.model_sha256[:12]}…: serve the same "
                "file (`livecam engines serve` on the server) or fetch the same one here")

        def specs(items: list[dict[str, Any]]) -> tuple[TensorSpec, ...]:
            return tuple(TensorSpec(i["name"], ("N", *(int(d) for d in i["dims"])))
                         for i in items)

        self._inputs, self._outputs = specs(config["input"]), specs(config["output"])
        self.max_batch = int(config.get("max_batch_size", 0)) or None

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._prober is not None:
            self._prober.join(5.0)
            self._prober = None
        with self._lock:
            client, self._client, self._state = self._client, None, "closed"
        if client is not None:
            client.close()

    # -- requests ------------------------------------------------------------------------

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """float32 host arrays in and out (see :class:`Engine`); float16 on the wire.

        Raises :class:`EngineUnavailableError` when the server is down or misses the deadline.
        """
        sent_ns = time.perf_counter_ns()
        future = self.submit(feeds)
        while (outputs := self.result(future, sent_ns=sent_ns,
                                      wait_s=self.timeout_s + _GRACE_S)) is None:
            pass
        return outputs

    def result(self, future: Future[dict[str, np.ndarray]], *, sent_ns: int,
               wait_s: float) -> dict[str, np.ndarray] | None:
        """The float32 outputs of a request ``submit`` returned (sent at ``sent_ns``,
        ``time.perf_counter_ns``), waiting up to ``wait_s``; None while it is not answered yet
        and still within its deadline. Raises :class:`EngineUnavailableError` when it failed,
        or when it is still unanswered a grace period past its deadline (gRPC never called
        back: as down as a refused request; the server is marked down). Any thread."""
        left_s = (sent_ns - time.perf_counter_ns()) / 1e9 + self.timeout_s + _GRACE_S
        try:
            return future.result(timeout=max(0.0, min(wait_s, left_s)))
        except FutureTimeout as exc:
            if time.perf_counter_ns() < sent_ns + int((self.timeout_s + _GRACE_S) * 1e9):
                return None
            self._mark_down(self._index, exc)
            raise EngineUnavailableError(
                f"no answer from the Triton server at {self.url} within "
                f"{self.timeout_s + _GRACE_S:.1f} s") from exc

    def submit(self, feeds: Mapping[str, np.ndarray]) -> Future[dict[str, np.ndarray]]:
        """Send the rows now (one request per ``max_batch`` rows the server takes); the future
        holds the float32 outputs of all rows, or the first error."""
        rows = check_feeds(self._inputs, feeds)
        step = self.max_batch or rows
        if rows <= step:
            return self._submit_one(feeds)
        parts = [self._submit_one({k: v[i:i + step] for k, v in feeds.items()})
                 for i in range(0, rows, step)]
        future: Future[dict[str, np.ndarray]] = Future()
        remaining = [len(parts)]
        lock = threading.Lock()

        def part_done(_: Future[dict[str, np.ndarray]]) -> None:
            with lock:
                remaining[0] -= 1
                if remaining[0]:
                    return
            errors = [p.exception() for p in parts if p.exception() is not None]
            if errors:
                future.set_exception(errors[0])
            else:
                outs = [p.result() for p in parts]
                future.set_result({k: np.concatenate([o[k] for o in outs]) for k in outs[0]})

        for part in parts:
            part.add_done_callback(part_done)
        return future

    def _submit_one(self, feeds: Mapping[str, np.ndarray]) -> Future[dict[str, np.ndarray]]:
        future: Future[dict[str, np.ndarray]] = Future()
        with self._lock:
            client, index, state = self._client, self._index, self._state
            self._counts["requests"] += 1
        if state != "ready" or client is None:
            future.set_exception(EngineUnavailableError(
                f"the Triton server at {self.urls[index]} is {state} ({self._last_error}); "
                "reconnecting"))
            return future
        grpc = _grpc_client()
        wire = {s.name: np.ascontiguousarray(feeds[s.name], dtype=np.float16)
                for s in self._inputs}
        inputs = []
        for name, array in wire.items():
            item = grpc.InferInput(name, list(array.shape), "FP16")
            item.set_data_from_numpy(array)
            inputs.append(item)
        outputs = [grpc.InferRequestedOutput(s.name) for s in self._outputs]
        sent = sum(a.nbytes for a in wire.values())
        rows = len(next(iter(wire.values())))
        t0 = time.perf_counter_ns()
        with self._lock:
            self._counts["in_flight"] += 1
            self._counts["in_flight_max"] = max(self._counts["in_flight_max"],
                                                self._counts["in_flight"])
        answered = [False]  # counted out of in_flight once, whichever way it ends

        def landed() -> None:
            with self._lock:
                if not answered[0]:
                    answered[0] = True
                    self._counts["in_flight"] -= 1

        def done(result: Any, error: Any) -> None:
            landed()
            if error is not None:
                self._mark_down(index, error)
                future.set_exception(EngineUnavailableError(
                    f"Triton request to {self.urls[index]} failed: {_short(error)}"))
                return
            try:
                outs = {s.name: result.as_numpy(s.name) for s in self._outputs}
                short = [k for k, v in outs.items() if v is None or len(v) != rows]
            except ValueError:  # a reply whose bytes do not fill its shape (an empty one)
                outs, short = {}, [s.name for s in self._outputs]
            if short:  # an answer without our rows is no answer: cover, do not paste
                error = RuntimeError(f"the server returned no rows for {', '.join(short)}")
                self._mark_down(index, error)
                future.set_exception(EngineUnavailableError(
                    f"Triton at {self.urls[index]}: {error}"))
                return
            with self._lock:
                self._rtt_ms.append((time.perf_counter_ns() - t0) / 1e6)
                self._counts["bytes_sent"] += sent
                self._counts["bytes_received"] += sum(o.nbytes for o in outs.values())
                self._counts["rows"] += rows
            future.set_result({k: v.astype(np.float32) for k, v in outs.items()})

        try:
            client.async_infer(self.model_name, inputs, done, outputs=outputs,
                               client_timeout=self.timeout_s)
        except Exception as exc:  # a closed channel raises here instead of calling back
            landed()
            self._mark_down(index, exc)
            future.set_exception(EngineUnavailableError(
                f"Triton request to {self.urls[index]} failed: {_short(exc)}"))
        return future

    # -- failure and reconnection ----------------------------------------------------------

    def _mark_down(self, index: int, error: BaseException) -> None:
        with self._lock:
            self._counts["failures"] += 1
            if index != self._index or self._state != "ready":
                return
            self._state, self._last_error = "down", _short(error)
        log.warning("Triton server at %s is down (%s): faces are covered until it is back",
                    self.urls[index], self._last_error)
        self._wake.set()

    def _probe_loop(self) -> None:
        grpc = _grpc_client()
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            waits = Backoff(self.reconnect_initial_s, self.reconnect_max_s)
            while not self._stop.is_set() and self._state == "down":
                if self._stop.wait(waits.next_s()):
                    return
                for k in range(len(self.urls)):
                    index = (self._index + k) % len(self.urls)
                    try:
                        client, why = self._probe(grpc, index, check=True)
                    except ModelError as exc:
                        client, why = None, str(exc)
                    if client is None:
                        self._last_error = why
                        continue
                    with self._lock:
                        old, self._client = self._client, client
                        self._index, self._state = index, "ready"
                        self._counts["reconnects"] += 1
                    if old is not None:
                        old.close()
                    log.warning("Triton server at %s is ready: swapping again", self.url)
                    break

    def health(self) -> dict[str, Any]:
        """The link's state for status, /metrics and doctor (any thread)."""
        with self._lock:
            rtt = list(self._rtt_ms)
            doc: dict[str, Any] = {"backend": "triton", "model": self.model_name,
                                   "state": self._state, "url": self.url,
                                   "urls": list(self.urls), "last_error": self._last_error,
                                   **self._counts}
        doc["request_ms"] = {
            "p50": round(float(np.percentile(rtt, 50)), 3) if rtt else None,
            "p99": round(float(np.percentile(rtt, 99)), 3) if rtt else None}
        return doc


def probe_server(url: str, models: Sequence[str], timeout_s: float = 2.0) -> tuple[bool, str]:
    """(ready, one line) for ``livecam doctor``: is the server at ``url`` ready, and which of
    ``models`` does it serve (with the first characters of their sha256)?"""
    grpc = _grpc_client()
    client = grpc.InferenceServerClient(url=url)
    try:
        if not client.is_server_ready(client_timeout=timeout_s):
            return False, f"{url}: the server answers but is not ready"
        said, ok = [], True
        for name in models:
            if not client.is_model_ready(name, client_timeout=timeout_s):
                said.append(f"{name} not served")
                ok = False
                continue
            config = client.get_model_config(name, as_json=True,
                                              client_timeout=timeout_s)["config"]
            sha = config.get("parameters", {}).get("sha256", {}).get("string_value", "")
            said.append(f"{name} ready (sha256 {sha[:12] or 'unknown'})")
        return ok, f"{url}: " + ", ".join(said)
    except Exception as exc:  # gRPC and Triton raise their own untyped errors
        return False, f"{url}: {_short(exc)}"
    finally:
        client.close()
