"""The named forecasting datasets: where their files are found, downloaded and verified.

Where the named files come from (:func:`locate_dataset`): a path you give
(``data_dir=`` / ``--data-dir``: the file itself or a directory that holds it) and nothing
else; without one, in this order, the directory in ``$QPRIV_DATA_DIR``, the user cache
(:func:`cache_dir`: ``~/.cache/qpriv/data`` on Linux), and last a download from the
dataset's canonical address into that cache. Every file is checked against the published
sha256, so a dataset name always means the same bytes (:func:`file_sha256` gives the same
digest of any file, e.g. a user CSV a run records).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import logging
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from qpriv.errors import InvalidInputError

__all__ = [
    "CUSTOM",
    "DATASETS",
    "DATA_DIR_ENV",
    "ETT_HOURLY",
    "DatasetSpec",
    "SplitConvention",
    "cache_dir",
    "cache_root",
    "dataset_spec",
    "file_sha256",
    "locate_dataset",
]

log = logging.getLogger(__name__)

DATA_DIR_ENV = "QPRIV_DATA_DIR"
"""Environment variable naming a directory that holds the dataset files."""

DOWNLOAD_TIMEOUT_S = 60.0
"""Socket timeout of a dataset download, in seconds."""
STALE_DOWNLOAD_S = 3600.0
"""A partial download (``.NAME.*.part``) this old in the cache was killed: it is removed."""

SplitConvention = Literal["ett-hourly", "custom"]
ETT_HOURLY: SplitConvention = "ett-hourly"
CUSTOM: SplitConvention = "custom"

_HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class DatasetSpec:
    """A named dataset: its file name, published sha256, canonical address and split rule."""

    name: str
    filename: str
    sha256: str
    url: str
    split: SplitConvention


_ETT_URL = "https://raw.githubusercontent.com/zhouhaoyi/ETDataset/main/ETT-small/"

DATASETS: dict[str, DatasetSpec] = {
    "ETTh1": DatasetSpec(
        name="ETTh1",
        filename="ETTh1.csv",
        sha256="f18de3ad269cef59bb07b5438d79bb3042d3be49bdeecf01c1cd6d29695ee066",
        url=_ETT_URL + "ETTh1.csv",
        split=ETT_HOURLY,
    ),
    "ETTh2": DatasetSpec(
        name="ETTh2",
        filename="ETTh2.csv",
        sha256="a3dc2c597b9218c7ce1cd55eb77b283fd459a1d09d753063f944967dd6b9218b",
        url=_ETT_URL + "ETTh2.csv",
        split=ETT_HOURLY,
    ),
}
"""The named datasets, by name. ETT: CC BY-ND 4.0, zhouhaoyi/ETDataset (Informer, AAAI 2021)."""


def dataset_spec(name: str) -> DatasetSpec:
    """Return the registry entry of ``name`` (case-insensitive), or raise listing known names."""
    by_lower = {key.lower(): spec for key, spec in DATASETS.items()}
    spec = by_lower.get(str(name).lower())
    if spec is None:
        known = ", ".join(sorted(DATASETS))
        raise InvalidInputError(
            f"unknown dataset {name!r}; known datasets: {known}. For any other CSV with a "
            "'date' column and numeric channels, pass the file with --csv PATH "
            "(load_forecasting_data(csv=PATH)); it is split 70/10/20."
        )
    return spec


def cache_root() -> Path:
    """qpriv's user cache, where the platform keeps them (platformdirs): on Linux
    ``$XDG_CACHE_HOME/qpriv`` or ``~/.cache/qpriv`` (an unset, empty or relative
    ``XDG_CACHE_HOME`` is ignored, as the XDG base-directory specification asks), on macOS
    ``~/Library/Caches/qpriv``, on Windows ``%LOCALAPPDATA%\\qpriv\\Cache``."""
    import platformdirs

    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and not Path(xdg).is_absolute() and sys.platform.startswith("linux"):
        return Path.home() / ".cache" / "qpriv"
    return platformdirs.user_cache_path("qpriv", appauthor=False)


def cache_dir() -> Path:
    """The user cache for downloaded datasets: :func:`cache_root` ``/ "data"``."""
    return cache_root() / "data"


def locate_dataset(
    name: str, *, path: str | Path | None = None, allow_download: bool = True
) -> Path:
    """Return the path of the named dataset's file, verified against its published sha256.

    Where ``path`` is given (the file itself, or a directory holding it), it is the only place
    looked at: a path that lacks the file is an error, never a silent fallback elsewhere.
    Otherwise it looks, in order, at the directory in ``$QPRIV_DATA_DIR`` and the user cache
    (:func:`cache_dir`); then, if ``allow_download``, downloads the file from its canonical
    address into the cache (verified, written atomically). The first place that has the file
    wins; a file found there whose checksum does not match is
    an error (it is never silently replaced). Local checksums are computed once per process for
    a given path, modification time and size.

    Raises:
        InvalidInputError: unknown name; a file that fails its checksum; or no file anywhere
            and no download possible (the message lists every place looked at and the fixes).
    """
    spec = dataset_spec(name)
    looked: list[str] = []
    for where, candidate in _candidates(spec, path):
        if candidate is None:
            looked.append(f"{where}: (not set)")
            continue
        if candidate.is_file():
            _verify_checksum(spec, candidate)
            return candidate
        folder = candidate.parent
        reason = ("not found" if folder.is_dir() else
                  f"not found: {folder} is a file, not a directory" if folder.exists() else
                  "not found: no such directory")
        if path is not None:  # a place the user named is the only one: never a fallback
            raise InvalidInputError(
                f"dataset {spec.name}: the path given (--data-dir / data_dir=) {candidate}: "
                f"{reason}; put {spec.filename} there or "
                f"give the directory that holds it, or leave --data-dir out to use "
                f"${DATA_DIR_ENV}, the user cache or a download")
        looked.append(f"{where}: {candidate} ({reason})")

    target = cache_dir() / spec.filename
    if not allow_download:
        looked.append(f"download from {spec.url}: disabled (allow_download=False)")
        raise InvalidInputError(_not_found_message(spec, looked))
    try:
        return _download(spec, target)
    except (OSError, http.client.HTTPException) as exc:
        # an error naming a file is the cache's; the network's (URLError, a timeout or reset
        # while reading) name none
        if isinstance(exc, OSError) and not isinstance(exc, urllib.error.URLError) \
                and exc.filename is not None:
            raise InvalidInputError(
                f"dataset {spec.name}: the user cache {target.parent} cannot be written "
                f"({exc}); set XDG_CACHE_HOME to a writable directory, or put {spec.filename} "
                f"in a directory named by ${DATA_DIR_ENV} or --data-dir"
            ) from exc
        looked.append(f"download from {spec.url} into {target.parent}: failed ({exc})")
        raise InvalidInputError(_not_found_message(spec, looked)) from exc


def _candidates(spec: DatasetSpec, path: str | Path | None) -> list[tuple[str, Path | None]]:
    """The local places to look at, in order, with a label for messages (None: not set)."""
    given: Path | None = None
    if path is not None:
        given = Path(path).expanduser()
        if given.is_dir():
            given = given / spec.filename
    env = os.environ.get(DATA_DIR_ENV, "")
    from_env = Path(env).expanduser() / spec.filename if env else None
    return [
        ("path given (data_dir= / --data-dir)", given),
        (f"${DATA_DIR_ENV}", from_env),
        ("user cache", cache_dir() / spec.filename),
    ]


def _not_found_message(spec: DatasetSpec, looked: Sequence[str]) -> str:
    places = "; ".join(looked)
    return (
        f"dataset {spec.name}: no usable {spec.filename}. Looked at: {places}. "
        f"Provide it in one of these ways: set {DATA_DIR_ENV} to a directory that holds "
        f"{spec.filename}; pass the file or its directory (--data-dir DIR, or data_dir= / path= "
        f"in Python); or run once with internet access so that qpriv downloads it from "
        f"{spec.url} into {cache_dir()} (verified by sha256)."
    )


_DIGESTS: dict[tuple[str, int, int], str] = {}
"""sha256 of local files already hashed in this process, by (resolved path, mtime_ns, size)."""


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(_HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _file_key(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return (str(path.resolve()), stat.st_mtime_ns, stat.st_size)


def _cached_sha256(path: Path) -> str:
    key = _file_key(path)
    if key not in _DIGESTS:
        _DIGESTS[key] = _sha256_file(path)
    return _DIGESTS[key]


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes (computed once per path, size and modification time): what
    a run records of a user CSV, so that a changed file is never taken for the one trained on."""
    return _cached_sha256(Path(path))


def _verify_checksum(spec: DatasetSpec, path: Path) -> None:
    actual = _cached_sha256(path)
    if actual != spec.sha256:
        raise InvalidInputError(
            f"dataset {spec.name}: {path} fails its checksum (sha256 {actual}, published "
            f"{spec.sha256}): it is modified, truncated or a different file. Replace it with the "
            f"unmodified {spec.filename} (delete it and let qpriv download it from {spec.url}), "
            "or load a modified file as a custom CSV with --csv PATH (70/10/20 split)."
        )


def _download(spec: DatasetSpec, target: Path) -> Path:
    """Download ``spec.url`` to ``target``: temp file in the same directory, sha256, replace."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{spec.filename}.*.part"):  # a killed download's
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > STALE_DOWNLOAD_S:
                stale.unlink()
    log.info("downloading %s from %s to %s", spec.name, spec.url, target)
    handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below, unlinked on failure)
        dir=target.parent, prefix=f".{spec.filename}.", suffix=".part", delete=False
    )
    tmp = Path(handle.name)
    try:
        digest = hashlib.sha256()
        with handle, urllib.request.urlopen(spec.url, timeout=DOWNLOAD_TIMEOUT_S) as response:
            for chunk in iter(lambda: response.read(_HASH_CHUNK), b""):
                digest.update(chunk)
                handle.write(chunk)
        actual = digest.hexdigest()
        if actual != spec.sha256:
            raise InvalidInputError(
                f"dataset {spec.name}: the file downloaded from {spec.url} fails its checksum "
                f"(sha256 {actual}, published {spec.sha256}); nothing was written to "
                f"{target.parent}. Retry later, or place the unmodified {spec.filename} in "
                f"${DATA_DIR_ENV} or pass it with --data-dir."
            )
        tmp.chmod(0o644)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    _DIGESTS[_file_key(target)] = actual
    return target
