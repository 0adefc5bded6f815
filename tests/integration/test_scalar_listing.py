"""A listing whose items are ids, not objects (Matrix's ``{"joined_rooms": ["!a:…", …]}``): each id
becomes a record holding the kind's id field (what a tree kind's children are then listed
from); an item that is neither an object nor an id is malformed, with its reason, never a
traceback."""

from __future__ import annotations

import json
import pathlib

import pytest
from listener import listening

from ferryman_worker import cli

PROVIDER = """\
apiVersion: ferryman.dev/v1alpha1
kind: MigrationProvider
metadata: {name: rooms}
spec:
  kinds:
    rooms:
      request: {path: /joined_rooms}
      records: joined_rooms
      id: room_id
      fields:
        room_id: {type: string, required: true}
        name: {type: string}
"""


def test_a_listing_of_ids_is_sampled_as_records_of_the_kinds_id_and_a_stray_item_is_malformed(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    provider = tmp_path / "rooms.yaml"
    provider.write_text(PROVIDER)
    listing = {"joined_rooms": ["!a:example.org", "!b:example.org", None]}
    answers = {
        "/joined_rooms": (200, {"Content-Type": "application/json"}, json.dumps(listing).encode())
    }
    monkeypatch.setenv("FERRYMAN_SOURCE_TOKEN", "matrix-token")
    with listening(answers) as server:
        code = cli.main(
            ["provider", "sample", str(provider), "--kind", "rooms", "--base-url", server.url]
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "3 records, 2 parsed, 1 malformed" in out
    assert '"room_id": "!a:example.org"' in out and '"room_id": "!b:example.org"' in out
    assert "malformed None: " in out and "valid dictionary" in out
