"""Shared fixtures: one output folder for compiled code per test session, the shared/
folder that sits beside the repository (papers, anchors)."""
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
ANCHOR_JSON = SHARED / "anchors" / "talos_spatial_v2_model.json"


@pytest.fixture(scope="session")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("codegen_out")
