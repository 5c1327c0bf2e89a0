"""Tensor copies (lower/tensorcopy.py) over fatkit's tensor-map ABI (fatkit/runtime.py, docs/runtime.md), and
clusterlaunchcontrol (lower/clusterlaunch.py), on the CPU host target.

Maps come from the reference encoder; every copy is checked byte for byte against the numpy model of
tests/tma.py (written from the H200 measurements, not from the lowering) over random tensors: ranks 1-5, the
four swizzles, boxes partly or wholly outside the tensor (negative coordinates too), element (traversal)
strides, zero and NaN fill, 1/2/4/8-byte elements, im2col boxes, tile stores and reductions, the probes of
the next H200 run; a first coordinate off a 16-byte boundary traps (NVIDIA's copy faults).
Model and copies are also checked against NVIDIA's own bytes: tests/samples/h200/tma_samples.npz holds 14
cases of the H200 run of 2026-12-02 (driver 580; verification/tma.py, NVIDIA's kernel with the driver's map)
— each case, its tensor and the shared box (a store: the tensor) NVIDIA produced — written from that run's
cases.json and tma_raw.npz by `python verification/tma.py sample CASES RAW`.
The encoder's checks are tested against the driver's rules, and device-side map construction
(tensormap.replace + cp_fenceproxy) against the encoder's bytes. The same kernels are compiled for gfx942 and
gfx1100 and re-lowered for sm_90 (ptxas); verification/tma.py runs them on the H200 against NVIDIA's maps.

The copies also run on the gfx1100 and gfx942 code objects (fatkit.emulate, the tensor registered as a buffer
the kernel reaches through the map) against the same model: a deterministic subset of the seeded rows there
(AMD_SEEDS), every row of the fixed tables.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from fatkit import runtime
from fatkit.errors import FatkitError
from fatkit.translate import pipeline
from fatkit.translate.passes import run_passes
from fatkit.translate.pipeline import Options, translate
from fatkit.translate.ptx import parse_ptx
from fatkit.translate.ptx.printer import print_ptx
from tests import oracles, tma
from tests.amdrun import TARGETS, EmulatedProgram, HostProgram
from tests.ptxframes import entry

RNG = np.random.default_rng(21)
THREADS = 32
PATIENCE = 1 << 31  # mbarrier wait tries: a loaded CPU can keep the issuing thread off a core for long


@functools.cache
def _program(target: str = "host"):
    return _loaded(tma.module(), target)


def _loaded(ptx: str, target: str):
    """The kernels on `target` (tests/amdrun.py): launched with numpy arrays, the tensor as a buffer."""
    translation = translate(ptx, Options(target=target))
    assert all(k.status == "ok" for k in translation.kernels), translation.kernels
    return HostProgram(translation.product) if target == "host" else EmulatedProgram(translation.product)


def _seeded(seeds: range, every: int) -> list:
    """(seed, target) rows: every seed on the host, every `every`-th on the AMD targets."""
    return [pytest.param(seed, target, id=f"{seed}-{target}") for target in TARGETS for seed in seeds
            if target == "host" or seed % every == 0]


def _map(case: dict, memory: np.ndarray) -> bytes:
    if case["kind"] == "im2col":
        return runtime.encode_im2col(case["data_type"], memory.ctypes.data, case["dims"], case["strides"],
                                     case["lower"], case["upper"], case["channels"], case["pixels"], case["steps"],
                                     swizzle=case["swizzle"], oob_fill=int(case["nan"]))
    return runtime.encode_tensor_map(case["data_type"], memory.ctypes.data, case["dims"], case["strides"],
                                     case["box"], case["steps"], swizzle=case["swizzle"], oob_fill=int(case["nan"]))


def _run(case: dict, target: str = "host") -> None:
    """Launch the case on `target` and compare with the model: the box and every thread's completion flag
    (loads), or the tensor (stores)."""
    _launch_and_check(_program(target), tma.kernel_name(case), case, THREADS, tma.expected, [])


def _launch_and_check(program, kernel: str, case: dict, threads: int, expected, extra: list) -> None:
    """Launch `kernel` on the case's tensor, map and box (then the `extra` parameters) and compare with
    expected(case, tensor): the tensor after a store, or a load's box and every thread's completion flag."""
    memory = tma.tensor(case)
    want = expected(case, memory)
    out = np.zeros(tma.out_bytes(threads), np.uint8)
    box = tma.source(case)
    program.launch(kernel, tma.arguments(case, _map(case, memory), out, PATIENCE, box) + extra,
                   block=(threads,), buffers=(memory,))
    if case["kind"] == "store":
        np.testing.assert_array_equal(memory, want)
        return
    assert (out[tma.SHARED_BYTES:].view(np.uint32) == 1).all(), "the mbarrier phase did not complete"
    np.testing.assert_array_equal(out[:tma.SHARED_BYTES], want)


@pytest.mark.parametrize("seed, target", _seeded(range(40), 4))
def test_tile_loads_match_the_model(seed, target):
    _run(tma.load_case(seed), target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("swizzle", range(4))
def test_the_h200_measured_form_matches_the_model(swizzle, target):
    for coords in ([0, 0], [48, 60], [-16, -3]):
        _run(tma.anchor_case(swizzle, coords), target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", tma.edge_cases(), ids=lambda case: case["name"])
def test_strides_beyond_the_box_and_a_box_past_the_end_match_the_model(case, target):
    _run(case, target)


@pytest.mark.parametrize("target", TARGETS)
def test_a_first_coordinate_off_a_16_byte_boundary_traps(target):
    """NVIDIA's own copies fault there (CUDA error 715 on every such case of the H200 runs): loads, im2col
    loads, stores. (The other threads give up their wait soon: an AMD wave can run them before the trap.)"""
    unaligned = [*tma.unaligned_cases(), {**tma.im2col_case(0), "coords": [3, *tma.im2col_case(0)["coords"][1:]]},
                 {**tma.store_case(0), "coords": [3]}, {**tma.store_case(1), "coords": [2, 0]}]
    for case in unaligned:
        memory, out = tma.tensor(case), np.zeros(tma.out_bytes(THREADS), np.uint8)
        with pytest.raises(FatkitError, match="trapped"):
            _program(target).launch(tma.kernel_name(case), tma.arguments(case, _map(case, memory), out, 1000,
                                                                         tma.source(case)),
                                    block=(THREADS,), buffers=(memory,))


@pytest.mark.parametrize("target", TARGETS)
def test_a_box_wholly_outside_is_all_fill_and_still_completes_its_bytes(target):
    case = {**tma.load_case(0), "rank": 2, "data_type": 7, "size": 4, "dims": [40, 9], "pitch": 160,
            "strides": [160], "box": [32, 4], "steps": [1, 1], "swizzle": 3, "nan": True, "coords": [-100, 20],
            "bytes": 512}
    memory = tma.tensor(case)
    out = np.zeros(tma.out_bytes(THREADS), np.uint8)
    _program(target).launch("load2d", tma.arguments(case, _map(case, memory), out, PATIENCE), block=(THREADS,),
                            buffers=(memory,))
    assert (out[:512].view(np.uint32) == 0x7FF77FF7).all() and (out[512:tma.SHARED_BYTES] == 0xA5).all()
    assert (out[tma.SHARED_BYTES:].view(np.uint32) == 1).all()


@pytest.mark.parametrize("seed, target", _seeded(range(8), 2))
def test_im2col_loads_match_the_model(seed, target):
    _run(tma.im2col_case(seed), target)


@pytest.mark.parametrize("seed, target", _seeded(range(12), 3))
def test_tile_stores_and_reductions_match_the_model(seed, target):
    _run(tma.store_case(seed), target)


@pytest.mark.parametrize("seed, target", _seeded(range(12), 4))
def test_stores_partly_outside_write_the_elements_inside(seed, target):
    """Undefined on NVIDIA (its kernel faulted on each such case measured); fatkit skips the elements outside."""
    _run(tma.store_case(seed, inside=False), target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("swizzle", range(4))
def test_stores_of_the_measured_form_match_the_model(swizzle, target):
    for coords in ([0, 0], [48, 60], [-16, -3]):
        _run({**tma.anchor_case(swizzle, coords), "kind": "store", "kernel": "store2d", "operation": None}, target)


PROBES = [case for case in tma.probe_cases() if "kinds" not in case]


@pytest.mark.parametrize("case, target", [pytest.param(case, target, id=f"{case['name']}-{target}")
                                          for i, case in enumerate(PROBES) for target in TARGETS
                                          if target in ("host", TARGETS[1 + i % 2])])
def test_the_probes_of_the_next_h200_run_match_the_model(case, target):
    """fatkit's answer to each probe (verification/tma.py asks NVIDIA), on the host and one AMD target each:
    an expect-tx of the padded rows never completes, since fatkit transfers the unpadded ones."""
    if ".padded" not in case["name"]:
        _run(case, target)
        return
    memory = tma.tensor(case)
    out = np.zeros(tma.out_bytes(THREADS), np.uint8)
    _program(target).launch(tma.kernel_name(case), tma.arguments(case, _map(case, memory), out, 1000),
                            block=(THREADS,), buffers=(memory,))
    # (the box is not compared: threads that gave up waiting copy it out while the copy may still run)
    assert (out[tma.SHARED_BYTES:].view(np.uint32) == 0).all(), "a phase expecting the padded rows completed"


# ------------------------------------------------------------------------------------------- NVIDIA's bytes

H200 = Path(__file__).parent / "samples" / "h200" / "tma_samples.npz"


@functools.cache
def _h200() -> dict[str, np.ndarray]:
    with np.load(H200) as data:
        return {key: data[key] for key in data.files}


H200_CASES = sorted({key.split(":")[0] for key in np.load(H200).files})


def _h200_case(name: str) -> tuple[dict, np.ndarray, np.ndarray]:
    """(the case, with the expect-tx NVIDIA transfers; its tensor; NVIDIA's bytes)."""
    samples = _h200()
    case = json.loads(samples[f"{name}:case"].tobytes())
    if case["kind"] != "store":
        case["bytes"] = tma.transfer_bytes(case)
    return case, samples[f"{name}:tensor"].copy(), samples[f"{name}:nvidia"]


@pytest.mark.parametrize("name", H200_CASES)
def test_the_model_gives_nvidias_bytes(name):
    case, memory, nvidia = _h200_case(name)
    if case["kind"] == "store":
        want = tma.store(memory, case["dims"], case["strides"], case["size"], case["box"], case["steps"],
                         case["coords"], case["swizzle"], _h200()[f"{name}:source"], tma.REDUCE[case["operation"]])
    else:
        want = tma.expected(case, memory)
    np.testing.assert_array_equal(want, nvidia)


@pytest.mark.parametrize("name, target", [pytest.param(name, target, id=f"{name}-{target}")
                                          for target in TARGETS for i, name in enumerate(H200_CASES)
                                          if target == "host" or i % 3 == TARGETS.index(target)])
def test_fatkits_copies_give_nvidias_bytes(name, target):
    case, memory, nvidia = _h200_case(name)
    out = np.zeros(tma.out_bytes(THREADS), np.uint8)
    source = _h200().get(f"{name}:source", np.zeros(tma.SHARED_BYTES, np.uint8))
    _program(target).launch(tma.kernel_name(case), tma.arguments(case, _map(case, memory), out, PATIENCE, source),
                            block=(THREADS,), buffers=(memory,))
    if case["kind"] == "store":
        np.testing.assert_array_equal(memory, nvidia)
        return
    assert (out[tma.SHARED_BYTES:].view(np.uint32) == 1).all(), "the mbarrier phase did not complete"
    np.testing.assert_array_equal(out[:tma.SHARED_BYTES], nvidia)


# ------------------------------------------------------------------------------------------- tensormap

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("flags", [0, 1, 2, 3])
def test_a_map_built_on_the_device_is_the_encoders_and_loads_through_it(flags, target):
    """A zeroed map with every field replaced (the Triton/CUTLASS sequence; flags bit 0: dimension 0's element
    stride too), copied out with cp_fenceproxy, has the encoder's bytes, and (bit 1) a copy through it matches
    the model (f16, 64-byte swizzle, element stride 2 in dimension 1, NaN fill)."""
    spec = tma.REPLACE_MAP
    memory = RNG.integers(0, 256, spec["tensor_bytes"], dtype=np.uint8)
    built, out = np.zeros(128, np.uint8), np.zeros(1024, np.uint8)
    program = _loaded(tma.REPLACE, target)
    program.launch("build", [out, built, 0, memory, flags, 1 << 20])
    expected = runtime.encode_tensor_map(spec["data_type"], memory.ctypes.data, spec["dims"], spec["strides"],
                                         spec["box"], spec["steps"], swizzle=spec["swizzle"], oob_fill=1)
    assert built.tobytes() == expected
    box = tma.load(memory, spec["dims"], spec["strides"], spec["size"], spec["box"], spec["steps"], spec["coords"],
                   spec["swizzle"], spec["nan"])
    np.testing.assert_array_equal(out[:128], box[:128] if flags & 2 else 0)


# ------------------------------------------------------------------------------------------- encoder

GOOD = {"data_type": 7, "global_address": 0x10000, "global_dim": [64, 32], "global_strides": [256], "box_dim": [32, 8]}


@pytest.mark.parametrize("change, message", [
    ({"data_type": 13}, "tensorDataType 13"),
    ({"global_address": 0x10008}, "16-byte aligned"),
    ({"global_address": 0}, "non-null"),
    ({"global_dim": [0, 32]}, "globalDim[0] = 0"),
    ({"global_dim": [64, (1 << 32) + 1]}, "globalDim[1]"),
    ({"global_strides": [260]}, "multiple of 16"),
    ({"global_strides": [1 << 40]}, "below 2^40"),
    ({"global_strides": []}, "globalStrides needs 1"),
    ({"box_dim": [32, 257]}, "boxDim[1] = 257"),
    ({"box_dim": [3, 8]}, "multiple of 16"),
    ({"box_dim": [64, 8], "swizzle": 1}, "exceeds the 32-byte swizzle"),
    ({"element_strides": [1, 9]}, "elementStrides[1] = 9"),
    ({"oob_fill": 1, "data_type": 2}, "floating-point"),
    ({"swizzle": 4}, "32/64-byte atoms"),
    ({"interleave": 1}, "tensorRank >= 3"),
    ({"global_dim": [1] * 6, "global_strides": [16] * 5, "box_dim": [4] * 6}, "tensorRank 6"),
])
def test_the_encoder_rejects_what_the_driver_rejects(change, message):
    arguments = {**GOOD, **change}
    with pytest.raises(runtime.TensorMapError, match=message.replace("^", r"\^").replace("[", r"\[")
                       .replace("]", r"\]")):
        runtime.encode_tensor_map(**arguments)


def test_the_encoders_maps_decode_and_a_zero_map_is_a_rank_one_tile_map():
    image = runtime.encode_tensor_map(**GOOD, element_strides=[1, 4], swizzle=3, l2_promotion=2)
    fields = runtime.decode(image)
    assert (fields.global_address, fields.global_dim[:2], fields.global_stride[:1], fields.box_dim[:2]) == \
           (0x10000, [64, 32], [256], [32, 8])
    assert (fields.element_stride[:2], fields.rank, fields.element_type, fields.swizzle_mode, fields.l2_promotion) == \
           ([1, 4], 2, 7, 3, 2)
    moved = runtime.replace_address(image, 0x20000)
    assert runtime.decode(moved).global_address == 0x20000 and moved[8:] == image[8:]
    with pytest.raises(runtime.TensorMapError, match="aligned"):
        runtime.replace_address(image, 0x20004)
    zero = runtime.decode(bytes(128))
    assert (zero.rank, zero.element_stride, zero.mode, zero.swizzle_mode, zero.fill_mode) == (1, [1] * 5, 0, 0, 0)
    wide = runtime.decode(runtime.encode_im2col_wide(6, 0x1000, [16, 8, 4], [32, 256], -1, 0, 16, 64, wide_mode=1))
    assert (wide.mode, wide.lower_corner[0], wide.channels_per_pixel, wide.pixels_per_column) == (3, -1, 16, 64)
    with pytest.raises(runtime.TensorMapError, match="pixelBoxLowerCorner"):
        runtime.encode_im2col(6, 0x1000, [16, 8, 8, 2], [32, 256, 2048], [-200, 0], [0, 0], 16, 8)


# ------------------------------------------------------------------------------------------- clusterlaunchcontrol

CANCEL = tma.HEADER.replace("8.0", "8.7").replace("sm_90", "sm_100") + "\n" + entry(
    "cancel", "u64 out", ".pred %p<2>, .b32 %r<6>, .b64 %rd<2>", """
    mov.u32 %r1, response;
    mov.u32 %r2, bar;
    mbarrier.init.shared::cta.b64 [%r2], 1;
    mov.u32 %r3, -1;
    st.shared.v4.u32 [%r1], {%r3, %r3, %r3, %r3};
    clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r1], [%r2];
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 16;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;
    @!%p1 bra WAIT;
    cp.async.bulk.global.shared::cta.bulk_group [%rd1], [response], 16;
    ret;
""", declarations=".shared .align 16 .b8 response[16];\n.shared .align 8 .b64 bar;")


@pytest.mark.parametrize("target", TARGETS)
def test_try_cancel_fails_legally_and_completes_its_sixteen_bytes(target):
    """The request always fails: the response is fatkit's 16 zero bytes, written before the phase (which
    waits for 16 bytes of transactions) completes."""
    out = np.full(16, 0xEE, np.uint8)
    _loaded(CANCEL, target).launch("cancel", [out])
    assert out.tobytes() == bytes(16)


# ------------------------------------------------------------------------------------------- refusals, codegen

def _reason(body: str) -> str:
    ptx = tma.HEADER.replace("8.0", "8.6").replace("sm_90", "sm_100") + f"""
.visible .entry refused(.param .align 64 .b8 map[128])
{{
    .reg .b32 %r<8>; .reg .b64 %rd<4>; .reg .b16 %h<4>;
    .shared .align 128 .b8 s[4096];
    .shared .align 8 .b64 bar;
    mov.u32 %r1, s;
    mov.u32 %r2, bar;
    {body}
    ret;
}}
"""
    options = Options(target="host")
    (report,) = pipeline.lower(pipeline.passes(pipeline.parse(ptx, options), options), options).reports
    assert report.status == "unsupported", body
    return report.reason


@pytest.mark.parametrize("body, reason", [
    (("cp.async.bulk.tensor.2d.shared::cluster.global.tile::gather4.mbarrier::complete_tx::bytes [%r1], "
      "[map, {%r3, %r3, %r3, %r3, %r3}], [%r2];"), "gather4/scatter4"),
    (("cp.async.bulk.tensor.3d.shared::cluster.global.im2col::w.mbarrier::complete_tx::bytes [%r1], "
      "[map, {%r3, %r3, %r3}], [%r2], {%h1, %h2};"), "im2col::w"),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [map, {%r3}], [%r2];",
     "takes 2 coordinates"),
    (("cp.async.bulk.tensor.2d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%r1], [map, {%r3, %r3}], "
      "[%r2], {%h1};"), "im2col copies are 3d to 5d"),
    ("cp.async.bulk.tensor.3d.global.shared::cta.im2col_no_offs.bulk_group [map, {%r3, %r3, %r3}], [%r1];",
     "im2col_no_offs"),
])
def test_refusals_name_the_mode(body, reason):
    assert reason in _reason(body)


@pytest.mark.parametrize("processor", ["gfx942", "gfx1100"])
def test_the_kernels_compile_for_amd(processor):
    translation = translate(tma.module() + "".join(p.split("\n", 3)[3] for p in (tma.REPLACE, CANCEL)),
                            Options(target=processor))
    assert all(k.status == "ok" for k in translation.kernels), translation.kernels


def test_tile_loads_move_whole_chunks_where_they_can():
    """The loads' 16-byte path exists (the tests above cannot tell it from the element path by results)."""
    options = Options(target="gfx942")
    lowered = pipeline.lower(pipeline.passes(pipeline.parse(tma.HEADER + tma.load_kernel(2), options), options),
                             options)
    assert "load <4 x i32>, ptr addrspace(1)" in lowered.kernels[0].llvm_ir


def test_the_kernels_are_valid_ptx_and_relower_for_sm_90(tmp_path):
    for ptx, arch in ((tma.module(), "sm_90"), (tma.REPLACE, "sm_90a")):
        oracles.assert_ptxas_accepts(ptx, tmp_path, arch)
        translation = translate(ptx, Options(target="sm_90"))
        assert all(k.status == "ok" for k in translation.kernels), translation.kernels
        oracles.assert_ptxas_accepts(translation.product, tmp_path)


MULTICAST = tma.HEADER + tma.load_kernel(2).replace(
    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2], [%rd7, {%c0, %c1}], "
    "[%r3];",
    "cvt.u16.u32 %h1, %c4;\n    mov.u64 %rd6, 0;\n    cp.async.bulk.tensor.2d.shared::cluster.global.tile"
    ".mbarrier::complete_tx::bytes.multicast::cluster.L2::cache_hint [%r2], [%rd7, {%c0, %c1}], [%r3], %h1, %rd6;")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mask", [1, 0b1011, 0b10])
def test_multicast_in_a_cluster_of_one_writes_the_ctas_box_when_its_bit_is_set(mask, target):
    """ctaMask (here the fifth coordinate's low bits) names the CTAs of the cluster that receive the box and
    the complete-tx: in a cluster of one, rank 0 alone. Without bit 0 nothing is written and the phase never
    completes (the waits give up after `patience` tries)."""
    assert MULTICAST != tma.HEADER + tma.load_kernel(2)
    program = _loaded(MULTICAST, target)
    case = {**tma.anchor_case(3, [8, 5]), "coords": [8, 5, 0, 0, mask]}
    memory = tma.tensor(case)
    out = np.zeros(tma.out_bytes(THREADS), np.uint8)
    patience = PATIENCE if mask & 1 else 1000
    program.launch("load2d", tma.arguments(case, _map(case, memory), out, patience), block=(THREADS,),
                   buffers=(memory,))
    flags = out[tma.SHARED_BYTES:].view(np.uint32)
    if mask & 1:
        assert (flags == 1).all()
        np.testing.assert_array_equal(out[:tma.SHARED_BYTES], tma.expected({**case, "coords": [8, 5]}, memory))
    else:
        assert (flags == 0).all() and (out[:tma.SHARED_BYTES] == 0xA5).all()


def _reduce_kernel(operation: str) -> str:
    return tma.HEADER + tma.store_kernel(1, operation)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("operation, data_type, values, old, want", [
    ("add", 7, np.array([1.5, -2.0, 1e-45, np.inf], np.float32), np.array([2.25, 2.0, 1e-45, 1.0], np.float32),
     np.array([3.75, 0.0, 2.8e-45, np.inf], np.float32)),
    ("add", 6, np.array([1.0, 0.5, -0.0, 65504], np.float16), np.array([2.0, 0.25, -0.0, 65504], np.float16),
     np.array([3.0, 0.75, -0.0, np.inf], np.float16)),
])
def test_floating_point_reductions_use_the_maps_element_type(operation, data_type, values, old, want, target):
    """The element type comes from the map at run time: the same instruction adds f32 or f16 lanes."""
    program = _loaded(_reduce_kernel(operation), target)
    size = values.itemsize
    memory = np.zeros(64, np.uint8)
    memory[:len(old) * size] = old.view(np.uint8)
    box = np.zeros(tma.SHARED_BYTES, np.uint8)
    box[:len(values) * size] = values.view(np.uint8)
    image = runtime.encode_tensor_map(data_type, memory.ctypes.data, [len(values)], [], [16 // size])
    case = {"kind": "store", "coords": [0], "kernel": f"reduce_{operation}1d"}
    program.launch(f"reduce_{operation}1d", tma.arguments(case, image, 0, 0, box), block=(THREADS,),
                   buffers=(memory,))
    np.testing.assert_array_equal(memory[:len(want) * size].view(values.dtype), want)
    assert (memory[len(want) * size:] == 0).all()  # the box's other lanes lie outside the tensor


@pytest.mark.parametrize("target", TARGETS)
def test_a_map_of_another_rank_traps(target):
    memory, out = np.zeros(256, np.uint8), np.zeros(tma.out_bytes(THREADS), np.uint8)
    case = {**tma.anchor_case(0, [0, 0]), "coords": [0, 0, 0]}
    image = runtime.encode_tensor_map(1, memory.ctypes.data, [64, 2], [128], [64, 2])
    with pytest.raises(FatkitError, match="trapped"):
        _program(target).launch("load3d", tma.arguments(case, image, out, 1000), block=(THREADS,),
                                buffers=(memory,))


@pytest.mark.parametrize("target", TARGETS)
def test_min_of_a_half_precision_map_traps(target):
    program = _loaded(_reduce_kernel("min"), target)
    memory, box = np.zeros(64, np.uint8), np.zeros(tma.SHARED_BYTES, np.uint8)
    image = runtime.encode_tensor_map(6, memory.ctypes.data, [8], [], [8])
    case = {"kind": "store", "coords": [0], "kernel": "reduce_min1d"}
    with pytest.raises(FatkitError, match="trapped"):
        program.launch("reduce_min1d", tma.arguments(case, image, 0, 0, box), block=(THREADS,), buffers=(memory,))


@pytest.mark.parametrize("directives, shared, reason", [
    (".maxntid 512 .reqnctapercluster 4, 1, 1", 4096, ("4 CTAs of 512 threads cannot run as one workgroup "
                                                      "(2048 > 1024 threads)")),
    (".maxntid 128 .reqnctapercluster 2, 2, 2", 12288, ("8 CTAs of 12288 bytes of shared memory cannot run as one "
                                                       "workgroup (98304 > 65536 bytes of LDS)")),
])
def test_cluster_refusals_say_why_the_cluster_cannot_be_one_workgroup(directives, shared, reason):
    ptx = tma.HEADER + "\n" + entry("clustered", "u64 out", ".b32 %r<4>, .b64 %rd<2>", """
    st.shared.u32 [s], 0;
    mov.u32 %r1, %cluster_ctarank;
    st.global.u32 [%rd1], %r1;
    ret;
""", directives=directives, declarations=f".shared .align 16 .b8 s[{shared}];")
    options = Options(target="host")
    (report,) = pipeline.lower(pipeline.passes(pipeline.parse(ptx, options), options), options).reports
    assert report.status == "unsupported" and reason in report.reason, report.reason


@pytest.mark.parametrize("target", TARGETS)
def test_nvccs_tma_kernel_loads_and_stores_through_an_encoded_map(target):
    """tests/ptx_sources/hopper.cu's `tma` (nvcc's PTX: the map a __grid_constant__ parameter reached by
    cvta.param): a 32 x 32 int box at (0, 32) of a 64 x 64 tensor into shared memory, each thread's element
    out, then the box stored back at (0, 0)."""
    sample = (Path(__file__).parent / "samples" / "ptx" / "hopper.sm_90a.ptx").read_text()
    translation = translate(sample, Options(target=target))
    kernel = "_Z3tma14CUtensorMap_stPi"
    assert {k.name: k.status for k in translation.kernels}[kernel] == "ok"
    program = HostProgram(translation.product) if target == "host" else EmulatedProgram(translation.product)
    matrix = RNG.integers(-2**31, 2**31, (64, 64), dtype=np.int64).astype(np.int32)
    before = matrix.copy()
    out = np.zeros(64, np.int32)
    image = runtime.encode_tensor_map(3, matrix.ctypes.data, [64, 64], [256], [32, 32])
    program.launch(kernel, [image, out], block=(64,), buffers=(matrix,))
    np.testing.assert_array_equal(out, before[32:34, :32].ravel())
    expected = before.copy()
    expected[:32, :32] = before[32:, :32]
    np.testing.assert_array_equal(matrix, expected)


GLOBAL_MAP = tma.HEADER + """
.global .align 64 .b8 gmap[128];

.visible .entry through_global(.param .align 64 .b8 map[128], .param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    .shared .align 128 .b8 box[512];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 0;
COPY:
    cvt.u64.u32 %rd2, %r1;
    mov.u64 %rd3, map;
    add.u64 %rd3, %rd3, %rd2;
    ld.param.u32 %r2, [%rd3];
    mov.u64 %rd3, gmap;
    add.u64 %rd3, %rd3, %rd2;
    st.global.u32 [%rd3], %r2;
    add.u32 %r1, %r1, 4;
    setp.lt.u32 %p1, %r1, 128;
    @%p1 bra COPY;
    fence.proxy.tensormap::generic.release.gpu;
    mov.u32 %r3, box;
    mov.u32 %r4, bar;
    mbarrier.init.shared::cta.b64 [%r4], 1;
    mov.u32 %r5, 16;
    cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r3], [gmap, {%r5}], [%r4];
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r4], 64;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r4], 0;
    @!%p1 bra WAIT;
    cp.async.bulk.global.shared::cta.bulk_group [%rd1], [box], 64;
    ret;
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_a_map_in_a_global_variable_is_read_there(target):
    """A map the kernel copied into a .global variable, named directly as the copy's operand (a box that runs
    8 elements past the end)."""
    data = np.arange(40, dtype=np.uint16)
    out = np.zeros(32, np.uint16)
    image = runtime.encode_tensor_map(1, data.ctypes.data, [40], [], [32])
    _loaded(GLOBAL_MAP, target).launch("through_global", [image, out], buffers=(data,))
    np.testing.assert_array_equal(out, np.concatenate([np.arange(16, 40), np.zeros(8)]).astype(np.uint16))


# ------------------------------------------------------------------------------------------- elected copies

@functools.cache
def _elected_program(target: str):
    return _loaded(tma.elected_module(), target)


def _run_elected(case: dict, target: str, warps: int) -> None:
    """The case's copy issued under elect.sync by each of the first `warps` warps of a 64-thread block (on
    gfx942 one wave of two PTX warps), the lanes of each sharing it (passes/elected.py): warp w's box lands
    tma.HALF·w bytes in, every thread sees the phase complete (the mbarrier counted each warp's bytes once),
    and a store or reduction reaches the tensor once per issuing warp."""
    _launch_and_check(_elected_program(target), "elected_" + tma.kernel_name(case), case, 64,
                      lambda case, memory: tma.expected_elected(case, memory, warps), [warps])


@pytest.mark.parametrize("seed, target", _seeded(range(40), 4))
def test_elected_tile_loads_are_shared_by_the_warp_and_match_the_model(seed, target):
    case = tma.load_case(seed)
    if case["bytes"] > tma.HALF:  # (those are the plain kernel's: test_tile_loads_match_the_model)
        case = {**case, "box": [case["box"][0]] + [1] * (case["rank"] - 1)}
        case["bytes"] = int(np.prod(tma.box_extents(case["box"], case["steps"]))) * case["size"]
    _run_elected(case, target, 1 + seed % 2)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("swizzle", range(4))
def test_elected_loads_of_the_measured_form_match_the_model(swizzle, target):
    for warps, coords in ((2, [0, 0]), (1, [48, 60]), (2, [-16, -3]), (2, [-96, 20])):
        _run_elected(tma.anchor_case(swizzle, coords), target, warps)


@pytest.mark.parametrize("target", TARGETS)
def test_the_h200_verifications_named_and_elected_cases_match_the_model(target):
    """The cases verification/tma.py adds for the H200 (NaN fill under each swizzle, traversal strides, a box
    wholly outside; the elected kernels' cases), here on every target (the elected ones every third on AMD)."""
    for case in tma.coverage_cases():
        _run(case, target)
    for index, case in enumerate(tma.elected_cases()):
        if target == "host" or index % 3 == 0:
            _run_elected(case, target, case["elected"])


@pytest.mark.parametrize("seed, target", _seeded(range(8), 2))
def test_elected_im2col_loads_match_the_model(seed, target):
    _run_elected(tma.im2col_case(seed), target, 1 + seed % 2)


@pytest.mark.parametrize("seed, target", _seeded(range(12), 3))
def test_elected_tile_stores_and_reductions_match_the_model(seed, target):
    _run_elected(tma.store_case(seed), target, 2 if tma.store_case(seed)["operation"] != "xor" else 1)


def test_the_elected_pass_spreads_every_tensor_copy_and_keeps_its_operands():
    """Every elected kernel's copy is moved to the rejoin label with the issuing lane's registers; a region
    that holds a load after the copy is left alone (its copy stays the one lane's)."""
    module = run_passes(parse_ptx(tma.elected_module()), until="elected").module
    text = print_ptx(module)
    assert text.count(".fatkit::spread") == 14 and "L2::cache_hint" not in text
    kept = tma.HEADER + tma.elected_load_kernel(2).replace(
        "ELECTED:", "    ld.global.u32 %e7, [%rd1];\nELECTED:")
    assert "fatkit::spread" not in print_ptx(run_passes(parse_ptx(kept), until="elected").module)
