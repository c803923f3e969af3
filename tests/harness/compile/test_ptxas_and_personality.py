"""Small answers capture relies on: which GPU names a ptxas accepts (read from its ``--help``; an output it cannot
read refuses nothing), and ``torch.cuda.is_bf16_supported`` as each device personality answers it."""

from __future__ import annotations

import os
import stat
import sys

import pytest

from harness.compile.personality import device_personality
from harness.compile.targets import _ptxas_archs

pytestmark = pytest.mark.lane_independent

HELP = """Usage  : ptxas [options] <ptx file>,...
--gpu-name <gpu name>                                    (-arch)
        Specify name of NVIDIA GPU to generate code for.
        Allowed values for this option:  'sm_50','sm_80','sm_90','sm_90a'.
        Default value:  'sm_52'.
--help                                                   (-h)
"""


def _fake_ptxas(tmp_path, text: str):
    p = tmp_path / "ptxas"
    p.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write({text!r})\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)
    return str(p)


@pytest.mark.skipif(os.name != "posix", reason="a fake ptxas is a shebang script")
def test_ptxas_help_is_read_and_an_unreadable_one_refuses_nothing(tmp_path):
    assert _ptxas_archs(_fake_ptxas(tmp_path, HELP)) == frozenset({"sm_50", "sm_80", "sm_90", "sm_90a", "sm_52"})
    # a ptxas whose --help this harness cannot parse (another layout, a wrapper printing nothing) is not evidence
    # that it refuses every target: None, so no target is dropped
    assert _ptxas_archs(_fake_ptxas(tmp_path, "ptxas: NVIDIA (R) Ptx optimizing assembler\nusage: see docs\n")) is None
    assert _ptxas_archs(_fake_ptxas(tmp_path, "")) is None
    assert _ptxas_archs(str(tmp_path / "missing-ptxas")) is None


@pytest.mark.parametrize(("target", "bf16"), [("sm75", False), ("sm80", True), ("sm86", True), ("sm89", True),
                                              ("sm90", True), ("sm100", True), ("sm120", True)])
def test_is_bf16_supported_per_personality(target, bf16):
    """bf16 arithmetic arrived with sm80 (CUDA C Programming Guide, compute capability 8.0); a launcher that asks
    gets the answer of the target it is replayed as."""
    p = device_personality(target)
    assert p is not None
    assert p.answer("is_bf16_supported", (), {}) is bf16
