"""Every base opcode of the PTX ISA 9.x instruction set (ISA chapter 9.7), with the section it belongs to.

An instruction is `opcode{.modifier}*`; the table holds only the part before the first dot. Modifier
chains are open-ended (`.shared::cta`, `.mbarrier::complete_tx::bytes`, `.kind::mxf8f6f4`) and new ones
appear with every ISA release, so the parser checks their spelling, not their names. Multi-word
instructions of the ISA (`add.cc`, `bar.warp.sync`, `cp.async.bulk.tensor`, `mbarrier.try_wait`,
`tensormap.replace`) are listed under their first word.
"""

from __future__ import annotations

INTEGER = "integer"
EXTENDED_INTEGER = "extended-integer"
FLOAT = "float"
COMPARISON = "comparison"
LOGIC = "logic"
DATA = "data-movement"
TEXTURE = "texture"
SURFACE = "surface"
CONTROL = "control-flow"
SYNC = "sync-communication"
WARP_MATRIX = "warp-matrix"
ASYNC_MATRIX = "warpgroup-matrix"
TENSOR_CORE_5 = "tensorcore-5th-gen"
STACK = "stack"
VIDEO = "video"
MISC = "miscellaneous"

_SECTIONS: dict[str, str] = {
    # 9.7.1 integer arithmetic (add/sub/mul/mad/div/rem/abs/neg/min/max are shared with 9.7.3 floating point)
    INTEGER: "add sub mul mad mul24 mad24 sad div rem abs neg min max popc clz bfind fns brev bfe bfi "
    "szext bmsk dp4a dp2a",
    # 9.7.2 extended precision: add.cc / sub.cc / mad.cc are `add`/`sub`/`mad` with a `.cc` modifier
    EXTENDED_INTEGER: "addc subc madc",
    # 9.7.3 / 9.7.4 floating point and half precision
    FLOAT: "testp copysign fma rcp sqrt rsqrt sin cos lg2 ex2 tanh",
    # 9.7.5 / 9.7.6 comparison and selection
    COMPARISON: "set setp selp slct",
    # 9.7.7 logic and shift
    LOGIC: "and or xor not cnot lop3 shf shl shr",
    # 9.7.9 data movement and conversion (cp.async*, cp.reduce.async.bulk*, cvt.pack, ld.global.nc,
    # st.async, st.bulk, multimem.*, tensormap.replace/cp_fenceproxy)
    DATA: "mov shfl prmt ld ldu st multimem prefetch prefetchu applypriority discard createpolicy "
    "isspacep cvta cvt mapa getctarank cp tensormap",
    # 9.7.10 texture, 9.7.11 surface
    TEXTURE: "tex tld4 txq istypep",
    SURFACE: "suld sust sured suq",
    # 9.7.12 control flow
    CONTROL: "bra brx call ret exit",
    # 9.7.13 parallel synchronization and communication
    SYNC: "bar barrier membar fence atom red vote match activemask redux griddepcontrol elect mbarrier "
    "clusterlaunchcontrol",
    # 9.7.14 warp-level matrix (wmma, mma, mma.sp, ldmatrix, stmatrix, movmatrix)
    WARP_MATRIX: "wmma mma ldmatrix stmatrix movmatrix",
    # 9.7.15 warpgroup-level matrix multiply-accumulate
    ASYNC_MATRIX: "wgmma",
    # 9.7.16 TensorCore 5th generation family
    TENSOR_CORE_5: "tcgen05",
    # 9.7.17 stack manipulation
    STACK: "stacksave stackrestore alloca",
    # 9.7.18 / 9.7.19 video (scalar and SIMD)
    VIDEO: "vadd vsub vabsdiff vmin vmax vshl vshr vmad vset vadd2 vsub2 vavrg2 vabsdiff2 vmin2 vmax2 "
    "vset2 vadd4 vsub4 vavrg4 vabsdiff4 vmin4 vmax4 vset4",
    # 9.7.20 miscellaneous
    MISC: "brkpt nanosleep pmevent trap setmaxnreg",
}

# base opcode -> ISA section
OPCODES: dict[str, str] = {op: section for section, ops in _SECTIONS.items() for op in ops.split()}
