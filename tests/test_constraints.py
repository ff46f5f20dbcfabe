"""Constraint specs: bad link-to-link and joint specs are one-line errors naming the offending
thing; rows and their names."""
import pytest

from casadi_delassus.constraints import ConstraintSet
from casadi_delassus.errors import ConstraintError
from conftest import model_for, tilted_robot


@pytest.mark.parametrize("spec, words", [
    ("FL_fot|RR_foot:3d", "unknown link or frame of robot 'go2' 'FL_fot'; did you mean 'FL_foot'"),
    ("FL_foot|FL_foot:6d", "are on the same body"),
    ("FL_foot|FL_calf:3d", "are on the same body 'FL_calf'"),
    ("FL_foot|RR_foot:3d@1,2;3,4,5", "points must be @ax,ay,az[;bx,by,bz]"),
    ("FL_foot|RR_foot:3d@1,2,3;4,5,6;7,8,9", "points must be @ax,ay,az[;bx,by,bz]"),
    ("FL_foot|RR_foot:6d@1,2,3", "only A|B:3d takes points"),
    ("FL_foot|RR_foot:random6", "a link-to-link constraint is 3d or 6d"),
    ("FL_foot|:3d", "names two links"),
    ("JOINT:FL_hip_jiont", "unknown joint of robot 'go2' 'FL_hip_jiont'; did you mean 'FL_hip_joint'"),
])
def test_bad_specs(spec, words):
    with pytest.raises(ConstraintError) as err:
        ConstraintSet.parse(model_for("go2"), [spec])
    assert words in str(err.value) and "\n" not in str(err.value)


def test_rows_and_names():
    cs = ConstraintSet.parse(tilted_robot(), ["JOINT:tj0", "JOINT:tj3", "t7|t5:6d", "t7|t5:3d"])
    assert cs.m == 6 + 1 + 6 + 3
    assert cs.row_names[:7] == [f"tj0.{n}" for n in ("vx", "vy", "vz", "wx", "wy", "wz")] + ["tj3.v"]
    assert cs.row_names[7] == "t7|t5.vx" and cs.row_names[-1] == "t7|t5.z"
