"""The HTTP side of a :class:`~simulator.server.virtual_host.VirtualHost`: what a governor probes.

``/health``, ``/ping``, ``/version``, ``/v1/models`` and ``/metrics``, as ``sim serve`` answers
them (:mod:`simulator.server.routes`), on a loopback port of the virtual-time loop. There is no
``/v1/completions``: the workload reaches the engine inside the run, not over HTTP.

One difference from a real server, on purpose: between two processes (the engine down for a
restart) every endpoint answers 503 where vLLM's port is closed. The governor's probes and
scrapes read both as "not serving", and the port stays bound, so a restart never races another
program for it.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from simulator.server.routes import VLLM_VERSION
from simulator.server.virtual_host import VirtualHost

_DOWN = 503


class _ProcessCollector:
    """``process_start_time_seconds`` of the process up now: one process from the next."""

    def __init__(self, host: VirtualHost) -> None:
        self._host = host

    def collect(self) -> list[Metric]:
        start = GaugeMetricFamily(
            "process_start_time_seconds", "Start time of the process since unix epoch in seconds."
        )
        start.add_metric([], self._host.process_start)
        return [start]


class _EngineCollector:
    """The ``vllm:*`` families of the process up now."""

    def __init__(self, host: VirtualHost) -> None:
        self._host = host

    def collect(self) -> list[Metric]:
        metrics = self._host.metrics
        return [] if metrics is None else list(metrics.collect())


class VirtualFace:
    """The endpoints of one virtual host.

    Args:
        host: The host they show.
    """

    def __init__(self, host: VirtualHost) -> None:
        self._host = host
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(_ProcessCollector(host))
        self._registry.register(_EngineCollector(host))

    def app(self) -> web.Application:
        """An aiohttp application with every route."""
        app = web.Application()
        app.router.add_get("/health", self.health)
        app.router.add_get("/ping", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        return app

    def _up(self) -> bool:
        self._host.sync()
        return self._host.serving

    async def health(self, _: web.Request) -> web.Response:
        """200 while a process is up (draining included), else 503."""
        return web.Response(status=200 if self._up() else _DOWN)

    async def version(self, _: web.Request) -> web.Response:
        """The vLLM version the simulator imitates."""
        if not self._up():
            return web.Response(status=_DOWN)
        return web.json_response({"version": VLLM_VERSION})

    async def models(self, _: web.Request) -> web.Response:
        """The OpenAI model list: the one served model."""
        if not self._up():
            return web.Response(status=_DOWN)
        name = self._host.settings.served_model_name
        model = {"id": name, "object": "model", "owned_by": "vllm", "root": name}
        return web.json_response({"object": "list", "data": [model]})

    async def metrics(self, _: web.Request) -> web.Response:
        """Prometheus text format 0.0.4 of the process up now."""
        if not self._up():
            return web.Response(status=_DOWN)
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})


async def serve_face(host: VirtualHost, address: str) -> tuple[web.AppRunner, int]:
    """Start the face on a free port of ``address``: the runner (to clean up) and the port."""
    runner = web.AppRunner(VirtualFace(host).app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, address, 0).start()
    _, port = runner.addresses[0][:2]
    return runner, int(port)
