"""`ebbtide keys create | revoke` against a database of its own."""

from __future__ import annotations

import pytest

from app.cli import main


def test_keys_are_printed_once_and_revoked_by_prefix(
    cli_database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["keys", "create", "--tenant", "acme", "--scopes", "memory:read,memory:write"])
    captured = capsys.readouterr()
    key = captured.out.strip()
    assert key.startswith("ebt_") and "shown only once" in captured.err
    main(["keys", "revoke", key[:12]])
    assert "revoked 1 key(s)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["keys", "revoke", key[:12]])
    with pytest.raises(SystemExit, match="unknown scopes"):
        main(["keys", "create", "--tenant", "acme", "--scopes", "memory:all"])
    with pytest.raises(SystemExit, match="tenant names are"):
        main(["keys", "create", "--tenant", "acme/ops", "--scopes", "memory:read"])
    main(["keys", "create", "--tenant", " ａｃｍｅ ", "--scopes", "memory:read"])
    assert "key for tenant acme with" in capsys.readouterr().err
