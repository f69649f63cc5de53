"""Building the service from params and running it under uvicorn (in the foreground for `pai serve`,
in a thread for tests, the replay and the benchmarks)."""

from __future__ import annotations

import socket
import threading
import time
from functools import partial
from pathlib import Path

import uvicorn

from retrieval.conversation.capture import CaptureParams
from retrieval.db import database_url
from retrieval.embed import get_embedder
from retrieval.logs.used import used_labels
from retrieval.params import (
    EmbedParams,
    ForgetParams,
    IngestParams,
    MaintainParams,
    SearchParams,
    StagingParams,
    UsedParams,
    load_section,
)

from .app import create_app
from .auth import check_exposure
from .extractor import build_extractor
from .hotswap import HotSwapper
from .interface import Selector
from .picker import Picker
from .selectors import FirstStageSelector
from .service import Service


def build_service(
    params: Path | None,
    selector: Selector | None = None,
    inline: bool = False,
    staging_dir: Path | None = None,
    timeout_s: float = 30.0,
    host: str = "127.0.0.1",
    explore_seed: int | None = None,
    db_url: str | None = None,
) -> Service:
    """A service; with no `selector` it follows the announced champion (hot-swap), starting on the
    first-stage order until the first one is loaded. Beyond loopback it needs a write token. `explore_seed`
    seeds exploration's draws (the lab's replays repeat; a user's service draws afresh); `db_url` (default
    `database_url()`): a lab's scratch log (`retrieval.logs.scratch`)."""
    check_exposure(host)
    sp = load_section(params, "search", SearchParams)
    st = load_section(params, "staging", StagingParams)
    if staging_dir is not None:
        st = StagingParams(dir=str(Path(staging_dir).resolve()), git=st.git)
    db_url = db_url or database_url()
    picker = Picker(
        selector or FirstStageSelector(),
        timeout_s=timeout_s,
        min_chunks=sp.min_chunks,
        token_budget=sp.token_budget,
        explore_rate=sp.explore_rate,
        seed=explore_seed,
        conversation_tokens=sp.conversation_tokens,
        previews=sp.previews,
    )
    cp = load_section(params, "capture", CaptureParams)
    return Service(
        db_url=db_url,
        embedder=get_embedder(load_section(params, "embed", EmbedParams)),
        picker=picker,
        search=sp,
        ingest=load_section(params, "ingest", IngestParams),
        staging=st,
        inline=inline,
        swapper=HotSwapper(picker, db_url) if selector is None else None,
        host=host,
        capture=cp,
        extractor=build_extractor(cp),
        maintain=load_section(params, "maintain", MaintainParams),
        forget=load_section(params, "forget", ForgetParams),
        relabel=partial(used_labels, p=load_section(params, "used", UsedParams)),
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class BackgroundServer:
    """uvicorn in a daemon thread on a free loopback port; `with` starts and stops it."""

    def __init__(self, service: Service, host: str = "127.0.0.1", port: int | None = None):
        self.port = port or free_port(host)
        self.url = f"http://{host}:{self.port}"
        self.server = uvicorn.Server(
            uvicorn.Config(create_app(service), host=host, port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> BackgroundServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("service did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
