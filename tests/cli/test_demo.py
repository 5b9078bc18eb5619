"""``partctl demo`` end to end, small: the story runs and the final check holds."""

from __future__ import annotations

import io
import re

import pytest

from partctl.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_demo_ends_with_every_acknowledged_message_readable_once() -> None:
    code, out, err = run("demo", "--messages", "400", "--batch", "10")
    assert code == 0, out + err
    assert "CHECK OK: 1,200 acknowledged messages; 1,200 readable exactly once at their " \
           "offsets; 0 missing or moved, 0 duplicated" in " ".join(out.split())
    assert "controller epoch 2" in out  # the crashed broker was the controller
    moves = re.findall(r"leader (\d+) -> (\d+)", out)
    assert len(moves) == 2 and moves[0][::-1] == moves[1]  # failover, then preferred back
    assert "\x1b[" not in out  # no terminal codes without a TTY
    assert not err


def test_demo_exits_non_zero_when_the_check_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    import partctl.demo as demo
    from node.clients import AckCheck

    def broken(records: object, acknowledged: dict[int, bytes]) -> AckCheck:
        return AckCheck(acknowledged=len(acknowledged), read=0,
                        missing=tuple(acknowledged), duplicated=())

    monkeypatch.setattr(demo, "check_acknowledged", broken)
    code, out, _ = run("demo", "--messages", "60", "--batch", "10")
    assert code == 1
    assert "CHECK FAILED" in out


def test_demo_refuses_bad_sizes() -> None:
    code, _, err = run("demo", "--messages", "0")
    assert code == 1 and err.startswith("partctl: error:")
