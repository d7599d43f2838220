"""AMD programs: an AMDHSA code object loaded into GPU memory, its kernel descriptor turned into
COMPUTE_* register state, and the kernel-argument block (explicit arguments, code-object-v5 hidden
arguments and the AQL dispatch packet that v4 kernels read their sizes from).

The code object is parsed by `runtime.drivers.amd.elf` (written alongside the RDNA3 interpreter);
applying R_AMDGPU_RELATIVE64 relocations, which that module does not do, lives here. The dispatch
packet is the generated `hsa_kernel_dispatch_packet_t` (hsa.h).
"""
from __future__ import annotations

import ctypes
import struct
from array import array
from typing import TYPE_CHECKING, Any, Literal, Sequence, overload

from hcq_bindings.amd import hsa

from runtime.drivers.amd import elf
from runtime.drivers.amd.pm4 import ShRegs
from runtime.drivers.amd.scratch import NO_SCRATCH
from runtime.hcq.errors import ProgramError
from runtime.hcq.memory import MemKind, round_up
from runtime.hcq.program import ArgSlot, ArgValue, KernArgs, Program, write_arg
from runtime.hcq.queue import HWQueue, Var, as_tuple3

if TYPE_CHECKING:
    from runtime.drivers.amd.arch import AMDArch
    from runtime.drivers.amd.device import AMDDevice

R_AMDGPU_RELATIVE64 = 13          # llvm/BinaryFormat/ELFRelocs/AMDGPU.def
E_FLAGS_OFFSET = 0x30             # ELF64 header: e_flags
EF_AMDGPU_MACH = 0x0FF            # llvm/BinaryFormat/ELF.h: the processor in e_flags
SHT_RELA = 4
DISPATCH_PACKET_B = ctypes.sizeof(hsa.hsa_kernel_dispatch_packet_t)
_KERNARG_ADDRESS_OFFSET_B = int(getattr(hsa.hsa_kernel_dispatch_packet_t, "kernarg_address").offset)
_U64 = struct.Struct("<Q")
_BLOCK_TEMPLATES_KEPT = 16  # launch shapes whose block a program keeps (a droppable cache)
_LAUNCH_QUEUES_KEPT = 16    # launch shapes whose commands a program keeps (a droppable cache)
MAX_LDS_B = 64 * 1024
MAX_WORKGROUP_THREADS = 1024
_M32 = 0xFFFFFFFF

# Code-object-v5 hidden arguments this runtime fills (AMDGPUUsage.rst, "Code Object V5 Metadata");
# every other hidden_* argument is left zero.
_HIDDEN_SIZES = ("hidden_block_count_x", "hidden_block_count_y", "hidden_block_count_z",
                 "hidden_group_size_x", "hidden_group_size_y", "hidden_group_size_z",
                 "hidden_remainder_x", "hidden_remainder_y", "hidden_remainder_z",
                 "hidden_grid_dims", "hidden_dynamic_lds_size")
# gfx11 and gfx940+ code addresses scratch through the hardware's per-wave base (architected flat
# scratch); these inputs belong to older scratch setups and are refused.
_UNSUPPORTED_USER_SGPRS = ("private_segment_buffer", "flat_scratch_init", "private_segment_size")


def apply_relocations(co: "elf.CodeObject", image: bytearray, base: int) -> None:
    """Applies the dynamic relocations of a code object loaded at GPU address `base`."""
    for sec in co.sections:
        if sec.type != SHT_RELA:
            continue
        for off in range(sec.offset, sec.offset + sec.size, 24):
            r_offset, r_info, r_addend = struct.unpack_from("<QQq", co.data, off)
            rtype = r_info & _M32
            if rtype != R_AMDGPU_RELATIVE64:
                raise ProgramError(f"unsupported relocation type {rtype} at {r_offset:#x} in "
                                   f"{sec.name} (only R_AMDGPU_RELATIVE64 is handled)")
            struct.pack_into("<Q", image, r_offset, base + r_addend)


def check_target(lib: bytes, arch: "AMDArch", name: str) -> None:
    """Refuses a code object built for a processor the architecture record does not cover (its
    ELF header's EF_AMDGPU_MACH)."""
    mach = struct.unpack_from("<I", lib, E_FLAGS_OFFSET)[0] & EF_AMDGPU_MACH
    if mach not in arch.elf_machs:
        have = ", ".join(f"{m:#05x}" for m in sorted(arch.elf_machs))
        raise ProgramError(f"{name}: the code object is for EF_AMDGPU_MACH {mach:#05x}, not a "
                           f"{arch.name} processor ({have}): compile it for the device's target")


def accumulation_layout(kd: "elf.KernelDescriptor", arch: "AMDArch", name: str
                        ) -> tuple[int | None, bool]:
    """(first accumulation VGPR, TG_SPLIT) of a kernel for an architecture whose VGPRs and
    accumulation registers share one file (gfx90a and later CDNA: COMPUTE_PGM_RSRC3.ACCUM_OFFSET
    holds offset / 4 - 1, and RSRC1's VGPR count, in granules of 8, covers both); (None, False)
    elsewhere. Refuses a descriptor whose accumulation registers start beyond its VGPRs."""
    if not arch.unified_agprs:
        return None, False
    gc = arch.gc
    offset = (((kd.rsrc3 & gc.COMPUTE_PGM_RSRC3__ACCUM_OFFSET_MASK)
               >> gc.COMPUTE_PGM_RSRC3__ACCUM_OFFSET__SHIFT) + 1) * 4
    vgprs = (((kd.rsrc1 & gc.COMPUTE_PGM_RSRC1__VGPRS_MASK)
              >> gc.COMPUTE_PGM_RSRC1__VGPRS__SHIFT) + 1) * 8
    if offset > vgprs:
        raise ProgramError(f"{name}: RSRC3.ACCUM_OFFSET puts the accumulation registers at VGPR "
                           f"{offset}, beyond the {vgprs} VGPRs RSRC1 allocates")
    return offset, bool(kd.rsrc3 & gc.COMPUTE_PGM_RSRC3__TG_SPLIT_MASK)


def scalar_kind(type_name: str) -> str:
    """ArgSlot.scalar for an OpenCL by-value argument's `.type_name` ("int" -> "i", "float" ->
    "f", "uint" -> "u"); "" for vectors, structs and anything else."""
    t = type_name.strip()
    if t in _FLOAT_TYPES:
        return "f"
    if t in _SIGNED_TYPES:
        return "i"
    if t in _UNSIGNED_TYPES or t.startswith("unsigned "):
        return "u"
    return ""


_FLOAT_TYPES = frozenset(("half", "float", "double"))
_SIGNED_TYPES = frozenset(("char", "signed char", "short", "int", "long", "long long",
                           "ptrdiff_t", "intptr_t", "int8_t", "int16_t", "int32_t", "int64_t"))
_UNSIGNED_TYPES = frozenset(("bool", "uchar", "ushort", "uint", "ulong", "size_t", "uintptr_t",
                             "uint8_t", "uint16_t", "uint32_t", "uint64_t"))


def _ints3(xs: Sequence[int]) -> bool:
    """Whether `xs` is a tuple of three Python ints (what a kept launch's key holds)."""
    return type(xs) is tuple and len(xs) == 3 and type(xs[0]) is int \
        and type(xs[1]) is int and type(xs[2]) is int


class _LaunchQueue:
    """A launch's commands kept per shape, and the variables each launch binds. Once built
    (`ready`), also what `AMDProgram._launch_kept` sends: a copy of the commands (`words`),
    the places each launch's values go in it (`spots`: dword of the low half, of the high half
    or -1, which value: 0 the argument block's address, 1 the timeline value waited for, 2 the
    one signalled, and the addend), the first timeline value a field cannot hold (`v_end`),
    and the shape's launch block with its address left zero (`block`)."""

    __slots__ = ("queue", "kernargs", "before", "value", "words", "spots", "v_end", "block")

    def __init__(self, queue: HWQueue, kernargs: Var, before: Var, value: Var) -> None:
        self.queue, self.kernargs, self.before, self.value = queue, kernargs, before, value
        self.words = array("I")
        self.spots: tuple[tuple[int, int, int, int], ...] = ()
        self.v_end = 0
        self.block = b""

    def ready(self, block: bytes) -> None:
        """Takes the commands built so far as the ones kept launches send."""
        self.words = array("I", self.queue.dwords())
        which = {self.kernargs: 0, self.before: 1, self.value: 2}
        self.spots = tuple((p.lo, p.hi, which[p.var], p.add) for p in self.queue.patch_points)
        # `update` refuses a value past a field's bits: v - 1 + add (waited for) or v + add
        ends = [(1 << p.max_bits) - p.add + (p.var is self.before)
                for p in self.queue.patch_points if p.var is not self.kernargs]
        self.v_end = min(ends, default=1 << 64)
        self.block = block


class AMDProgram(Program):
    """A kernel of an AMDHSA code object, ready to launch on the device's compute queue."""

    device: "AMDDevice"

    def __init__(self, device: "AMDDevice", lib: bytes, name: str, *,
                 dynamic_lds_B: int = 0) -> None:
        """`dynamic_lds_B`: LDS the kernel uses beyond its descriptor's group segment (Triton's
        `metadata.shared`), allocated for every launch."""
        super().__init__(device, name, lib)
        try:
            co = elf.parse(lib)
        except elf.ElfError as e:
            raise ProgramError(f"{name}: bad code object: {e}") from e
        kern = co.kernels.get(name)
        if kern is None:
            raise ProgramError(f"no kernel {name!r} in the code object (has {sorted(co.kernels)})")
        self.kernel = kern
        kd = kern.kd
        self.kd = kd
        arch = device.gfx
        check_target(lib, arch, name)
        # DISPATCH_INITIATOR: the wave32 bit set for wave32 kernels, clear for wave64 ones
        # (-mwavefrontsize64), as the descriptor's ENABLE_WAVEFRONT_SIZE32 says.
        initiator = arch.dispatch_initiator
        if kd.wave32 and not arch.initiator_wave32:
            raise ProgramError(f"{name}: a wave32 kernel, but {arch.name} runs wave64 only")
        self.dispatch_initiator = initiator | arch.initiator_wave32 if kd.wave32 else \
            initiator & ~arch.initiator_wave32
        layout = kd.user_sgpr_layout()
        bad = [k for k in _UNSUPPORTED_USER_SGPRS if k in layout]
        if bad:
            raise ProgramError(f"{name}: needs the user SGPRs {bad}, which {arch.name} kernels "
                               "do not use (this runtime provides architected flat scratch)")
        self.accum_offset, self.tg_split = accumulation_layout(kd, arch, name)
        if dynamic_lds_B < 0:
            raise ProgramError(f"{name}: dynamic_lds_B must be >= 0, got {dynamic_lds_B}")
        self.lds_B = kern.group_segment_size + dynamic_lds_B
        if self.lds_B > MAX_LDS_B:
            raise ProgramError(f"{name}: {self.lds_B} B of LDS exceeds the {MAX_LDS_B} B a "
                               "workgroup can have")
        # -- load the image
        image = bytearray(co.image())
        self.lib_buf = device.alloc(max(len(image), 1), kind=MemKind.VRAM, executable=True)
        apply_relocations(co, image, self.lib_buf.va)
        device.copyin(self.lib_buf, image)
        self.pgm_va = self.lib_buf.va + kern.entry_vaddr
        self.kd_va = self.lib_buf.va + kern.kd_vaddr
        if self.pgm_va % 256:
            raise ProgramError(f"{name}: entry {self.pgm_va:#x} is not 256-byte aligned "
                               "(COMPUTE_PGM_LO holds address >> 8)")
        # -- arguments
        self.kernarg_B = kern.kernarg_size
        self.packet_offset = round_up(max(self.kernarg_B, 1), 64)
        slots, hidden = [], {}
        for i, a in enumerate(kern.metadata.get(".args", [])):
            kind = a.get(".value_kind", "by_value")
            if kind.startswith("hidden_"):
                hidden[kind] = (int(a[".offset"]), int(a[".size"]))
                continue
            slots.append(ArgSlot(a.get(".name", f"arg{i}"), int(a[".offset"]), int(a[".size"]),
                                 "buffer" if kind == "global_buffer" else "value",
                                 scalar_kind(a.get(".type_name", "")) if kind == "by_value"
                                 else ""))
        self.slots = tuple(slots)
        self.hidden = hidden
        # (global size, local size) -> the launch block of that shape, kernarg_address 0
        self._block_templates: dict[tuple[Any, Any], bytes] = {}
        # (global size, local size, wait) -> the commands of such a launch (`_launch_queue`)
        self._launch_queues: dict[tuple[Any, Any, bool], _LaunchQueue] = {}
        # -- register state, built once (the launch path only copies it)
        regs: ShRegs = device.sh_regs
        gc = device.gfx.gc
        lds_field = device.gfx.lds_granules(self.lds_B) << gc.COMPUTE_PGM_RSRC2__LDS_SIZE__SHIFT
        if lds_field & ~gc.COMPUTE_PGM_RSRC2__LDS_SIZE_MASK:
            raise ProgramError(f"{name}: LDS size {self.lds_B} B does not fit RSRC2.LDS_SIZE")
        self.rsrc1, self.rsrc3 = kd.rsrc1, kd.rsrc3
        self.rsrc2 = (kd.rsrc2 & ~gc.COMPUTE_PGM_RSRC2__LDS_SIZE_MASK) | lds_field
        state = array("I")
        state.extend(regs.set_sh_reg(regs.PGM_LO, (self.pgm_va >> 8) & _M32, self.pgm_va >> 40))
        state.extend(regs.set_sh_reg(regs.PGM_RSRC1, self.rsrc1, self.rsrc2))
        state.extend(regs.set_sh_reg(regs.PGM_RSRC3, self.rsrc3))
        # Scratch: the device's backing memory, sized for this kernel's private segment.
        uses_scratch = kd.private_segment_fixed_size or \
            kd.rsrc2 & gc.COMPUTE_PGM_RSRC2__SCRATCH_EN_MASK
        self.scratch = device.scratch.setup_for(kd.private_segment_fixed_size or 16) \
            if uses_scratch else NO_SCRATCH
        state.extend(regs.set_sh_reg(regs.TMPRING_SIZE, self.scratch.tmpring_size))
        state.extend(regs.set_sh_reg(regs.SCRATCH_BASE_LO, (self.scratch.base_va >> 8) & _M32,
                                     self.scratch.base_va >> 40))
        state.extend(regs.set_sh_reg(regs.RESTART_X, 0, 0, 0))
        state.extend(regs.set_sh_reg(regs.RESOURCE_LIMITS, 0))
        self.pm4_state = state
        # User SGPRs: 64-bit pointers at the positions the descriptor enables, in hardware order.
        self.user_sgpr_count = kd.user_sgpr_count
        ptrs: list[tuple[int, int]] = []
        if "dispatch_ptr" in layout:
            ptrs.append((layout["dispatch_ptr"], self.packet_offset))
        if "kernarg_segment_ptr" in layout:
            ptrs.append((layout["kernarg_segment_ptr"], 0))
        fixed: list[tuple[int, int]] = []
        if "queue_ptr" in layout:
            fixed.append((layout["queue_ptr"], device.queue_descriptor().va))
        n_user = max((slot + 2 for slot, _ in ptrs + fixed), default=0)
        if "dispatch_id" in layout:
            n_user = max(n_user, layout["dispatch_id"] + 2)  # dispatch id 0
        if n_user > self.user_sgpr_count:
            raise ProgramError(f"{name}: descriptor enables {n_user} user SGPRs but RSRC2 loads "
                               f"only {self.user_sgpr_count}")
        self.user_data_pointers = tuple(ptrs)
        self.user_data_fixed = tuple(fixed)
        self._n_user = n_user
        # A kernel that loads no user SGPRs (no arguments, no dispatch pointer) gets no
        # SET_SH_REG for them at all: the packet needs at least one register value.
        hdr = regs.set_sh_reg(regs.USER_DATA_0, *([0] * n_user)) if n_user else []
        self.user_data_header = array("I", hdr[:2])

    # -------------------------------------------------------------- launches
    @overload
    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = ...,
                 global_size: Sequence[int] = ..., local_size: Sequence[int] = ...,
                 wait: Literal[False] = ..., timeout_ms: float | None = ...) -> None: ...

    @overload
    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = ...,
                 global_size: Sequence[int] = ..., local_size: Sequence[int] = ...,
                 wait: Literal[True], timeout_ms: float | None = ...) -> float: ...

    @overload
    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = ...,
                 global_size: Sequence[int] = ..., local_size: Sequence[int] = ...,
                 wait: bool = ..., timeout_ms: float | None = ...) -> float | None: ...

    def __call__(self, *args: ArgValue, vals: Sequence[int | float] = (),
                 global_size: Sequence[int] = (1, 1, 1), local_size: Sequence[int] = (1, 1, 1),
                 wait: bool = False, timeout_ms: float | None = None) -> float | None:
        """Launches like `Program.__call__`, sending the same commands: those of a launch of
        this shape are built once (`_launch_queue`) and each launch patches in its own values
        (the argument block's address, the timeline value waited for and the one signalled)."""
        dev = self.device
        key = (global_size, local_size, wait)
        try:
            lq = self._launch_queues.get(key)  # type: ignore[arg-type]
        except TypeError:  # unhashable sizes (lists)
            lq, key = None, None  # type: ignore[assignment]
        if dev.tracer is not None or vals or key is None:
            return super().__call__(*args, vals=vals, global_size=global_size,
                                    local_size=local_size, wait=wait, timeout_ms=timeout_ms)
        if lq is not None and len(args) == len(self.slots):
            # (sizes equal to the key's as another type, 1.0 for 1, are checked as before)
            if not (_ints3(global_size) and _ints3(local_size)):
                as_tuple3(global_size, "global_size")
                as_tuple3(local_size, "local_size")
            kept = self._launch_kept(lq, args)
            if kept:
                if not wait:
                    return None
                dev.timeline_signal.wait(kept, timeout_ms)
                return (self._t1.timestamp - self._t0.timestamp) / dev.clock_hz
        dev.check_usable()
        with dev.submit_lock:
            kargs = self.fill_kernargs(args, global_size, local_size)  # checks the shape
            v = dev.timeline_value + 1
            if lq is None:
                lq = self._launch_queue(global_size, local_size, wait)
                if len(self._launch_queues) >= _LAUNCH_QUEUES_KEPT:
                    self._launch_queues.clear()
                self._launch_queues[key] = lq
                lq.ready(self._block_template(as_tuple3(global_size, "global_size"),
                                              as_tuple3(local_size, "local_size")))
            lq.queue.update({lq.kernargs: kargs.va, lq.before: v - 1, lq.value: v})
            dev.submit_timeline(lq.queue, v)
        if not wait:
            return None
        dev.timeline_signal.wait(v, timeout_ms)
        return (self._t1.timestamp - self._t0.timestamp) / dev.clock_hz

    def _launch_kept(self, lq: "_LaunchQueue", args: tuple[ArgValue, ...]) -> int:
        """A launch of a kept shape, sending what the general path sends: the shape's launch
        block copied with its address and the arguments written, the kept commands with this
        launch's values put in, on the compute ring. Returns the timeline value signalled, or
        0 when the general path must launch instead (a timeline value a command field cannot
        hold: it refuses it)."""
        dev = self.device
        dev.check_usable()
        with dev.submit_lock:
            block = lq.block
            va, view = dev.kernarg_arena().take(len(block), 64)
            view[:len(block)] = block
            _U64.pack_into(view, self.packet_offset + _KERNARG_ADDRESS_OFFSET_B, va)
            for slot, value in zip(self.slots, args):
                write_arg(view, slot, value, dev)
            v = dev.timeline_value + 1
            if v >= lq.v_end:
                return 0
            words = lq.words
            values = (va, v - 1, v)
            for lo, hi, which, add in lq.spots:
                x = values[which] + add
                words[lo] = x & _M32
                if hi >= 0:
                    words[hi] = x >> 32
            try:
                dev.compute_ring.put(words)
            except Exception as e:  # a fault noticed while submitting poisons the device
                dev.note_submit_error(e)
                raise
            dev.timeline_value = v
        return v

    def _launch_queue(self, global_size: Sequence[int], local_size: Sequence[int],
                      wait: bool) -> "_LaunchQueue":
        """The commands `launch_commands` builds for a launch of this shape, with variables
        where a launch's own values go."""
        lq = _LaunchQueue(self.device.compute_queue(), Var("kernargs"), Var("timeline before"),
                          Var("timeline value"))
        self.launch_commands(lq.queue, lq.kernargs, lq.before, lq.value, global_size, local_size,
                             wait)
        return lq

    # -------------------------------------------------------------- launch helpers
    def user_data(self, kernarg_va: int) -> list[int]:
        """COMPUTE_USER_DATA_* values for a kernel-argument block at `kernarg_va`."""
        vals = [0] * self._n_user
        for slot, a in self.user_data_fixed:
            vals[slot], vals[slot + 1] = a & _M32, a >> 32
        for slot, extra in self.user_data_pointers:
            a = kernarg_va + extra
            vals[slot], vals[slot + 1] = a & _M32, a >> 32
        return vals

    def check_launch(self, global_size: tuple[int, int, int], local_size: tuple[int, int, int]
                     ) -> None:
        """Rejects launch shapes the hardware cannot run."""
        lx, ly, lz = local_size
        if lx * ly * lz > MAX_WORKGROUP_THREADS:
            raise ProgramError(f"{self.name}: workgroup of {lx}x{ly}x{lz} threads exceeds "
                               f"{MAX_WORKGROUP_THREADS}")
        if any(g > _M32 for g in global_size):
            raise ProgramError(f"{self.name}: grid {global_size} exceeds 2^32-1 workgroups")

    def kernargs_size(self) -> int:
        return self.packet_offset + DISPATCH_PACKET_B

    def _fill_block(self, va: int, view: memoryview, global_size: tuple[int, int, int],
                    local_size: tuple[int, int, int]) -> KernArgs:
        # Everything but the block's own address depends on the shape only: built once per shape
        # (a few kept), then copied, with the address patched into the dispatch packet.
        tmpl = self._block_template(global_size, local_size)
        view[:len(tmpl)] = tmpl
        _U64.pack_into(view, self.packet_offset + _KERNARG_ADDRESS_OFFSET_B, va)
        return KernArgs(va, view[:max(self.kernarg_B, 1)], self.slots)

    def _block_template(self, global_size: tuple[int, int, int],
                        local_size: tuple[int, int, int]) -> bytes:
        """The launch block of a launch of this shape with its own address zero (kept)."""
        shape = (global_size, local_size)
        tmpl = self._block_templates.get(shape)
        if tmpl is None:
            scratch = bytearray(self.kernargs_size())
            self._fill_block_fields(0, memoryview(scratch), global_size, local_size)
            tmpl = bytes(scratch)
            if len(self._block_templates) >= _BLOCK_TEMPLATES_KEPT:
                self._block_templates.clear()
            self._block_templates[shape] = tmpl
        return tmpl

    def _fill_block_fields(self, va: int, view: memoryview, global_size: tuple[int, int, int],
                           local_size: tuple[int, int, int]) -> None:
        """Writes the dispatch packet (its kernarg_address = `va`) and the hidden arguments of a
        launch of this shape into a zeroed block."""
        gx, gy, gz = global_size
        lx, ly, lz = local_size
        dims = 3 if gz > 1 else 2 if gy > 1 else 1
        # The AQL packet v4 kernels read their sizes from (grid size in work-items, hsa.h).
        pkt = hsa.hsa_kernel_dispatch_packet_t.from_buffer(view, self.packet_offset)
        pkt.setup = dims << hsa.HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS
        pkt.workgroup_size_x, pkt.workgroup_size_y, pkt.workgroup_size_z = lx, ly, lz
        pkt.grid_size_x, pkt.grid_size_y, pkt.grid_size_z = gx * lx, gy * ly, gz * lz
        pkt.group_segment_size = self.lds_B
        pkt.kernel_object, pkt.kernarg_address = self.kd_va, va
        del pkt  # release the export of `view`
        h = self.hidden
        for axis, g, l in (("x", gx, lx), ("y", gy, ly), ("z", gz, lz)):
            self._hidden(view, h.get(f"hidden_block_count_{axis}"), g)
            self._hidden(view, h.get(f"hidden_group_size_{axis}"), l)
        self._hidden(view, h.get("hidden_grid_dims"), dims)

    @staticmethod
    def _hidden(view: memoryview, slot: tuple[int, int] | None, value: int) -> None:
        if slot is not None:
            off, size = slot
            view[off:off + size] = value.to_bytes(size, "little")

    def free(self) -> None:
        """Releases the code memory (the caller makes sure no launch is still running)."""
        self.device.free(self.lib_buf)
        self._t0.release()
        self._t1.release()
