"""docs/install.md's schema of doctor --json is the one the report's dataclasses render (operate/doctor_schema.py);
tests/operator/doctor_facts.py holds every document a doctor test gets to the same rows."""

from __future__ import annotations

from helpers import ROOT

from nvfp4_overlay.operate import doctor_schema


def test_install_md_documents_every_key_doctor_writes() -> None:
    text = (ROOT / doctor_schema.DOCUMENT).read_text(encoding="utf-8")
    assert doctor_schema.rendered(text) == text, "run nvfp4-overlay generate doctor-schema"


def test_each_key_has_its_type_presence_and_meaning() -> None:
    rows = list(doctor_schema.rows())
    assert len({path for path, *_ in rows}) == len(rows)
    assert all(kind and when and meaning for _, kind, when, meaning in rows)
    kinds = dict((path, kind) for path, kind, *_ in rows)
    assert kinds["jit.will_jit"] == "list of string or null" and kinds["exit_code"] == "integer"
    assert kinds["distributions.<name>.anchor.differs"] == "list of string"


def test_a_key_the_report_has_no_field_for_is_named_not_dropped_unseen() -> None:
    """parse() keeps only what the fields name; unplaced() names the rest, which doctor turns into a note
    (tests/operator/doctor_facts.py fails any document with such a note)."""
    from nvfp4_overlay.operate.doctor_report import Trace
    from nvfp4_overlay.operate.report_fields import unplaced

    facts = {"ok": False, "entries": {"rmsnorm": {"ok": True, "ops": [], "frames": 3}}, "hung": True}
    assert unplaced(Trace, facts) == ["entries.rmsnorm.frames", "hung"]
    assert unplaced(Trace, {"ok": None, "skipped": True}) == []
