"""assert_graph_replay on launchers of our own: a CUDA graph on the GPU lane, the two-call check on the interpreter
lane. A correct launcher passes, a launcher that caches its input by address reads stale data, a kernel that
leaves part of a returned output unwritten leaves poison, and every bad argument raises an error naming it."""

from __future__ import annotations

import pytest
import torch
from replay_kernels import PointerCache, rows, rows_from_host_count

from harness.replay import assert_graph_replay

pytestmark = pytest.mark.unreported  # deliberate failures stay out of the session's report


@pytest.fixture
def x(device):
    return torch.arange(15, dtype=torch.float32, device=device).reshape(5, 3)


def _replayed(device: str) -> str:
    how = "a CUDA graph" if device == "cuda" else "a second call on the same buffers (interpreter lane: no CUDA graph)"
    return f"Replayed: {how}, after fresh inputs were copied into the captured ones"


def test_a_correct_launcher_replays_to_the_eager_bits(x):
    assert_graph_replay(rows, {"x": x}, {"x": -x})
    assert_graph_replay(lambda x: (rows(x), rows(x + 1)), {"x": x}, lambda: {"x": x.flip(0)})
    assert_graph_replay(lambda x: (rows(x), x[1:]), {"x": x}, {"x": -x})  # a returned input view is not poisoned


def test_what_a_call_leaves_untouched_in_a_buffer_it_writes_in_place_is_no_difference(x):
    """A KV-cache store writes its slots only: the buffer starts from the same poisoned copy in both runs."""
    before = torch.zeros_like(x)
    assert_graph_replay(lambda x, out: rows(x, rows=3, out=out), {"x": x}, {"x": x + 7}, outputs={"out": before})
    assert torch.equal(before, torch.zeros_like(x)), "the check must leave the caller's buffers as they were"


def test_a_launcher_that_caches_its_input_by_address_reads_stale_data(x, device):
    with pytest.raises(AssertionError) as e:
        assert_graph_replay(PointerCache(), {"x": x}, {"x": -x})
    assert str(e.value).splitlines() == [
        "Graph replay differs from an eager run! (fn=PointerCache)",
        _replayed(device),
        "Output 'return': mismatched elements: 15 / 15 (100.0%)",
        "First difference at index (0, 0): eager has 0x80000000 (-0), replay has 0x00000000 (0)",
        "Poison: every output was filled with 0xFF bytes before the replay (a NaN in every IEEE float format, e4m3fn "
        "and e5m2 included; 0x80 in the fnuz FP8 formats; -1 or the maximum in integers)",
        "Rule: the replay's outputs equal an eager call's on the same fresh inputs, bit for bit (NaN payloads "
        "included)",
    ]


def test_an_output_element_the_replay_never_writes_is_named_as_poison(x, device):
    def partial(x):
        return rows(x, skip_last=True)

    with pytest.raises(AssertionError) as e:
        assert_graph_replay(partial, {"x": x}, {"x": x + 1})
    assert str(e.value).splitlines()[:5] == [
        "Graph replay differs from an eager run! (fn=partial)",
        _replayed(device),
        "Output 'return': mismatched elements: 5 / 15 (33.3%)",
        "First difference at index (0, 2): eager has 0x00000000 (0), replay has 0xffffffff (nan)",
        "The replay left poison there: it never wrote this element",
    ]


def test_several_outputs_name_the_first_that_differs_and_list_the_others(x):
    cached = PointerCache()

    def two(x, out):
        rows(x, skip_last=True, out=out)  # in place: the untouched column is poison in both runs
        return cached(x), rows(x, skip_last=True)

    with pytest.raises(AssertionError) as e:
        assert_graph_replay(two, {"x": x}, {"x": x + 1}, outputs={"out": torch.zeros_like(x)}, msg="store step")
    lines = str(e.value).splitlines()
    assert lines[0] == "store step"  # msg= goes first, as the other asserts' msg
    assert lines[3] == "Output 'return[0]': mismatched elements: 15 / 15 (100.0%)"
    assert lines[5] == "Also differs: output 'return[1]' (5 / 15 elements differ)"


@pytest.mark.gpu
def test_a_host_read_input_is_baked_into_the_graph_gpu(x):
    """The count is read on the host while capturing: the graph keeps the captured grid (3 rows), the eager call
    on the fresh count (5) writes 5. The interpreter lane's two eager calls cannot see this."""
    count = torch.tensor([3])
    with pytest.raises(AssertionError) as e:
        assert_graph_replay(rows_from_host_count, {"x": x, "count": count}, {"x": x, "count": torch.tensor([5])})
    assert str(e.value).splitlines()[2:4] == [
        "Output 'return': mismatched elements: 6 / 15 (40.0%)",
        "First difference at index (3, 0): eager has 0x41900000 (18), replay has 0x00000000 (0)",
    ]


# --- bad arguments -------------------------------------------------------------------------------------


def test_bad_arguments_are_named(x):
    with pytest.raises(TypeError, match="fn must be callable, got int"):
        assert_graph_replay(1, {"x": x}, {"x": x})
    with pytest.raises(TypeError, match="msg must be a str, a callable taking the failure text, or None, got int"):
        assert_graph_replay(rows, {"x": x}, {"x": x}, msg=123)
    with pytest.raises(TypeError, match=r"inputs must be a non-empty dict of argument name -> tensor, got tuple"):
        assert_graph_replay(rows, (x,), {"x": x})
    with pytest.raises(TypeError, match=r"inputs must be a non-empty dict .*got dict \(empty\)"):
        assert_graph_replay(rows, {}, {})
    with pytest.raises(TypeError, match=r"inputs: key 'not a name' is not an argument name"):
        assert_graph_replay(rows, {"not a name": x}, {"x": x})
    with pytest.raises(TypeError, match=r"inputs\['x'\] is a list; expected a tensor"):
        assert_graph_replay(rows, {"x": [1.0]}, {"x": x})
    with pytest.raises(TypeError, match=r"outputs must be a dict of argument name -> tensor, got list"):
        assert_graph_replay(rows, {"x": x}, {"x": x}, outputs=[x])
    with pytest.raises(ValueError, match=r"inputs and outputs both name \['x'\]"):
        assert_graph_replay(rows, {"x": x}, {"x": x}, outputs={"x": x})
    with pytest.raises(ValueError, match=r"fresh must give a value for each input and nothing else: inputs \['x'\], "
                                         r"fresh \['y'\]"):
        assert_graph_replay(rows, {"x": x}, {"y": x})
    with pytest.raises(ValueError, match=r"fresh\['x'\] has shape \(4, 3\) and dtype torch.float32; the captured "
                                         r"input has \(5, 3\) and torch.float32"):
        assert_graph_replay(rows, {"x": x}, {"x": x[:4]})
    with pytest.raises(TypeError, match=r"fresh\['x'\] is a float; expected a tensor"):
        assert_graph_replay(rows, {"x": x}, {"x": 1.0})
    with pytest.raises(TypeError, match=r"fresh must be a dict .* got list from the callable"):
        assert_graph_replay(rows, {"x": x}, lambda: [x])
    # what the replay cannot read or compare bit for bit, in any argument (fresh values were not checked for it)
    meta, sparse, cplx = x.to("meta"), x.to_sparse(), torch.zeros(5, 3, dtype=torch.complex64)
    for call, text in [
        (lambda: assert_graph_replay(rows, {"x": x}, {"x": meta}), r"fresh\['x'\] is a meta tensor"),
        (lambda: assert_graph_replay(rows, {"x": x}, {"x": sparse}), r"fresh\['x'\] is a torch.sparse_coo tensor"),
        (lambda: assert_graph_replay(rows, {"x": sparse}, {"x": x}), r"inputs\['x'\] is a torch.sparse_coo tensor"),
        (lambda: assert_graph_replay(rows, {"x": x}, {"x": x}, outputs={"o": cplx}),
         r"outputs\['o'\] has complex dtype torch.complex64; compare its torch.view_as_real\(\) instead"),
    ]:
        with pytest.raises(TypeError, match=text):
            call()
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=r"warmup must be an int >= 1"):
            assert_graph_replay(rows, {"x": x}, {"x": x}, warmup=bad)
    with pytest.raises(TypeError, match=r"fn=<lambda> \(capture\) returned None and outputs= names no buffer it "
                                        r"writes: nothing to compare|fn=<lambda> \(replay\) returned None"):
        assert_graph_replay(lambda x: None, {"x": x}, {"x": x})
    with pytest.raises(TypeError, match=r"returned return\[1\], which is a str"):
        assert_graph_replay(lambda x: (rows(x), "y"), {"x": x}, {"x": x})


# --- last: a call that cannot be captured ------------------------------------------------------------------


@pytest.mark.gpu
def test_a_call_that_syncs_with_the_host_cannot_be_captured_gpu(x):
    def syncing(x):
        return rows(x) * x.sum().item()

    with pytest.raises(AssertionError, match=r"(?s)fn=syncing cannot be captured in a CUDA graph: it synchronizes with "
                                             r"the host after its warmup \(torch.cuda.set_sync_debug_mode\('error'\): "
                                             r".*\); the capture was not attempted"):
        assert_graph_replay(syncing, {"x": x}, {"x": -x})
    assert torch.cuda.get_sync_debug_mode() == 0, "the sync debug mode is put back"
    assert_graph_replay(rows, {"x": x}, {"x": -x})
