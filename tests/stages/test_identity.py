"""What a refused work dir says differs between two runs: the options a user gives, never
neardup's own notes (``id_column_auto``, how the id column was chosen)."""

from __future__ import annotations

from neardup.stages.identity import differences


def test_differences_name_no_internal_field():
    old = {"inputs": [], "config": {"id_column": "id", "id_column_auto": True, "input_format": "auto"}}
    new = {"inputs": [], "config": {"id_column": None, "id_column_auto": False, "input_format": "text"}}
    assert differences(old, new) == ["id_column", "input_format"]
    assert differences({"inputs": [1], "config": {}}, {"inputs": [2], "config": {}}) == ["inputs"]
