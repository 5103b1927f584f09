"""The Copilot SDK imported with its dataclasses made on first use (sdk_import.py).

Each side runs in a fresh interpreter (this one may have imported the SDK either way): one
imports the SDK as anyone would, the other through :func:`import_sdk`; the two must describe
every class of every SDK module alike (tests/support/dataclass_description.py: reading a class's fields
makes it).
"""

from __future__ import annotations

import pytest

from tests.support.dataclass_description import described_both_ways

DESCRIBE = r"""
import sys
from tests.support.dataclass_description import report
if sys.argv[1] == "on_use":
    from polypilot_tui.agents.copilot.sdk_import import import_sdk
    from polypilot_tui.domain.dataclass_on_use import pending_count
    import_sdk()
    pending = pending_count()
else:
    import copilot
    pending = 0
import copilot.generated.rpc  # not all imported by ``copilot`` itself
sdk = [module for name, module in sorted(sys.modules.items()) if name == "copilot" or name.startswith("copilot.")]
report(pending, sdk)
"""


@pytest.mark.timeout(60)
def test_every_sdk_class_is_made_as_the_sdk_makes_it_and_none_before_its_use() -> None:
    sdk, ours = described_both_ways(DESCRIBE, 50)
    assert ours["pending"] > 1900  # what makes the import fast: no class made at import
    assert len(sdk["classes"]) > 1900
    assert ours["classes"] == sdk["classes"]
