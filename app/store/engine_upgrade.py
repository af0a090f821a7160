"""`ebbtide engine upgrade`: moves an embedded data folder written by an older major Postgres
(16, Ebbtide's embedded engine until 2026-12) to the bundled one (18) with `pg_upgrade`.

`pg_upgrade` needs the old version's binaries, which the new package no longer carries (both
packages install the `pgserver` module, so they cannot sit in one environment): they come
from `--old-bindir`, or are fetched with pip into a scratch folder outside the environment.
The upgrade copies (`--copy`): the old folder is renamed `pg.<old major>` and kept untouched
until the user deletes it; a failed upgrade leaves `pg` as it was. The next start migrates the
database (pgvector brought to the library's version).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.store.embedded import bundled_bindir, bundled_major, data_major, pgdata_of

# The embedded engine of the releases before Postgres 18 (Postgres 16.x, pgvector 0.6.2).
LEGACY_ENGINES = {16: "pgserver==0.1.4"}
ROOT_SYSTEM_USER = "pgserver"  # pgserver runs the server as this user when started as root


class NothingToUpgrade(Exception):
    """The data folder is missing or already on the bundled major version."""


class EmbeddedServerRunning(Exception):
    """A server still runs on the old data folder."""


class EngineUpgradeFailed(Exception):
    """pg_upgrade (or fetching the old binaries) failed; the old folder is untouched."""


@dataclass(frozen=True)
class EngineUpgrade:
    from_major: int
    to_major: int
    pgdata: Path
    kept: Path  # the old folder, renamed


def _system_user() -> str | None:
    if os.geteuid() != 0:
        return None
    from pgserver.utils import ensure_user_exists

    ensure_user_exists(ROOT_SYSTEM_USER)
    return ROOT_SYSTEM_USER


def _run(command: list[str], *, user: str | None, cwd: Path) -> str:
    done = subprocess.run(command, user=user, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise EngineUpgradeFailed(
            f"{Path(command[0]).name} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}"
        )
    return done.stdout


def fetch_legacy_bindir(major: int, into: Path) -> Path:
    """Installs the old engine's package into `into` (not into this environment) with pip."""
    package = LEGACY_ENGINES.get(major)
    if package is None:
        raise EngineUpgradeFailed(f"no known embedded engine wrote PostgreSQL {major} data")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target"]
    _run([*pip, str(into), package], user=None, cwd=into)
    return into / "pgserver" / "pginstall" / "bin"


def _running(pgdata: Path) -> bool:
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    return info is not None and bool(info.is_running())


def _checksums_on(old_bindir: Path, pgdata: Path, user: str | None, cwd: Path) -> bool:
    control = _run([str(old_bindir / "pg_controldata"), str(pgdata)], user=user, cwd=cwd)
    line = next((x for x in control.splitlines() if x.startswith("Data page checksum")), ":0")
    return line.split(":", 1)[1].strip() != "0"  # "Data page checksum version:    0": off


def _owned_folder(path: Path, user: str | None) -> None:
    path.mkdir(mode=0o700)
    if user is not None:
        shutil.chown(path, user, user)


def upgrade_embedded(
    data_dir: Path, old_bindir: Path | None = None, say: Callable[[str], None] = print
) -> EngineUpgrade:
    """Upgrades `data_dir/pg` to the bundled major version; what was done."""
    pgdata = pgdata_of(data_dir)
    written, bundled = data_major(pgdata), bundled_major()
    if written is None or written == bundled:
        raise NothingToUpgrade(f"{pgdata} holds no PostgreSQL data older than {bundled}")
    if _running(pgdata):
        raise EmbeddedServerRunning(f"a server still runs on {pgdata}: stop ebbtide first")
    user = _system_user()
    kept = pgdata.with_name(f"{pgdata.name}.{written}")
    if kept.exists():
        raise EngineUpgradeFailed(f"{kept} exists: move it away first (an earlier upgrade's copy)")
    staged = pgdata.with_name(f"{pgdata.name}.upgrading")
    shutil.rmtree(staged, ignore_errors=True)  # an interrupted attempt's
    # pg_upgrade writes its logs and scripts in the working folder, and its socket there:
    # a short path of the server's user's own.
    work = Path(tempfile.mkdtemp(prefix="ebbtide-upgrade-"))
    try:
        work.chmod(0o755)
        if user is not None:
            shutil.chown(work, user, user)
        if old_bindir is None:
            say(f"fetching the PostgreSQL {written} binaries ({LEGACY_ENGINES.get(written)})")
            old_bindir = fetch_legacy_bindir(written, work / "legacy")
        new_bindir = bundled_bindir()
        checksums = _checksums_on(old_bindir, pgdata, user, work)
        _owned_folder(staged, user)
        say(f"upgrading {pgdata} from PostgreSQL {written} to {bundled} (a copy)")
        initdb = [str(new_bindir / "initdb"), "-D", str(staged), "-U", "postgres"]
        initdb += ["--auth=trust", "--auth-local=trust", "--encoding=utf8"]
        initdb.append("--data-checksums" if checksums else "--no-data-checksums")
        _run(initdb, user=user, cwd=work)
        server_options = f"-c listen_addresses= -c unix_socket_directories={work}"
        _run(
            [
                str(new_bindir / "pg_upgrade"),
                *("--old-bindir", str(old_bindir), "--new-bindir", str(new_bindir)),
                *("--old-datadir", str(pgdata), "--new-datadir", str(staged)),
                *("--username", "postgres", "--copy", "--socketdir", str(work)),
                *("--old-options", server_options),
                *("--new-options", server_options),
            ],
            user=user,
            cwd=work,
        )
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    pgdata.rename(kept)
    staged.rename(pgdata)
    return EngineUpgrade(from_major=written, to_major=bundled, pgdata=pgdata, kept=kept)
