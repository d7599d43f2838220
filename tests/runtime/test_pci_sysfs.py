"""The sysfs PCI backend and the capability walk.

Against the machine's real PCI functions (read-only), compared with `lspci -D -xxxx -vv` parsed
here: every config byte this process may read, and the capability offsets, IDs (from lspci's own
names) and versions. Run as root, the comparison is repeated as the unprivileged user `nobody`
(sysfs then shows 64 bytes and lspci says "<access denied>"). Against the mock sysfs of
`runtime.drivers.mock.vfio` (always): extended capabilities, writes, BAR mappings, the
unprivileged view and the `list` CLI. And `walk_capabilities` on hand-made config images.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from hcq_bindings.linux import pci_regs as R
from runtime.drivers.mock.os import MockOS
from runtime.drivers.mock.vfio import MockPCIFunction, MockVfio
from runtime.drivers.pci import (CAP_ID_NAMES, EXT_CAP_ID_NAMES, Capability, ConfigAccessDenied,
                                 PCIAddress, PCIError, PciIds, SysfsPCIDevice, iommu_group_devices,
                                 iommu_group_of, list_devices, main, walk_capabilities)
from runtime.hcq.seam import RealOS

REPO = Path(__file__).resolve().parents[2]
SYSFS = "/sys/bus/pci/devices"
NOBODY = 65534

# lspci's names for capabilities (pciutils ls-caps.c, ls-ecaps.c) → (ID, extended). Our walk names
# capabilities from the generated bindings; these come from lspci, so the two are independent.
LSPCI_CAP_NAMES: list[tuple[str, int, bool]] = [
    ("Null", 0x00, False), ("Null", 0x00, True),  # capabilities a hypervisor hides (ID 0)
    ("Power Management version", 0x01, False), ("AGP version", 0x02, False),
    ("Vital Product Data", 0x03, False), ("Slot ID", 0x04, False), ("MSI:", 0x05, False),
    ("CompactPCI hot-swap", 0x06, False), ("PCI-X", 0x07, False), ("HyperTransport", 0x08, False),
    ("Vendor Specific Information", 0x09, False), ("Debug port", 0x0A, False),
    ("CompactPCI central resource control", 0x0B, False), ("Hot-plug capable", 0x0C, False),
    ("Subsystem:", 0x0D, False), ("AGP3", 0x0E, False), ("Secure device", 0x0F, False),
    ("Express", 0x10, False), ("MSI-X:", 0x11, False), ("SATA HBA", 0x12, False),
    ("PCI Advanced Features", 0x13, False), ("Enhanced Allocation", 0x14, False),
    ("Advanced Error Reporting", 0x01, True), ("Virtual Channel", 0x02, True),
    ("Device Serial Number", 0x03, True), ("Power Budgeting", 0x04, True),
    ("Root Complex Link", 0x05, True), ("Root Complex Internal Link", 0x06, True),
    ("Root Complex Event Collector", 0x07, True), ("Multi-Function Virtual Channel", 0x08, True),
    ("Root Bridge Control Block", 0x0A, True), ("Vendor Specific Information", 0x0B, True),
    ("Access Control Services", 0x0D, True), ("Alternative Routing-ID Interpretation", 0x0E, True),
    ("Address Translation Service", 0x0F, True),
    ("Single Root I/O Virtualization", 0x10, True), ("Multi-Root I/O Virtualization", 0x11, True),
    ("Multicast", 0x12, True), ("Page Request Interface", 0x13, True),
    ("Physical Resizable BAR", 0x15, True), ("Dynamic Power Allocation", 0x16, True),
    ("Transaction Processing Hints", 0x17, True), ("Latency Tolerance Reporting", 0x18, True),
    ("Secondary PCI Express", 0x19, True), ("Protocol Multiplexing", 0x1A, True),
    ("Process Address Space ID", 0x1B, True), ("Downstream Port Containment", 0x1D, True),
    ("L1 PM Substates", 0x1E, True), ("Precision Time Measurement", 0x1F, True),
    ("Designated Vendor-Specific", 0x23, True), ("VF Resizable BAR", 0x24, True),
    ("Data Link Feature", 0x25, True), ("Physical Layer 16.0 GT/s", 0x26, True),
    ("Lane Margining at the Receiver", 0x27, True), ("Data Object Exchange", 0x2E, True),
]


# ---------------------------------------------------------------------------------------- lspci
def _lspci_blocks(text: str) -> dict[str, dict[str, Any]]:
    """Per device in `lspci -D -xxxx -vv` output: config bytes of the hex dump, capabilities
    ([(offset, version or None, name)]) and whether lspci was denied them."""
    out: dict[str, dict[str, Any]] = {}
    cur: dict[str, Any] | None = None
    for line in text.splitlines():
        m = re.match(r"^([0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) ", line)
        if m:
            cur = out[m.group(1)] = {"config": bytearray(), "caps": [], "denied": False}
            continue
        if cur is None:
            continue
        m = re.match(r"^([0-9a-f]{2,3}): ((?:[0-9a-f]{2} ?){16})$", line)
        if m:
            assert int(m.group(1), 16) == len(cur["config"]), line
            cur["config"] += bytes.fromhex(m.group(2))
            continue
        if line == "\tCapabilities: <access denied>":
            cur["denied"] = True
            continue
        m = re.match(r"^\tCapabilities: \[([0-9a-f]+)(?: v(\d+))?\] (.*)$", line)
        if m:
            ver = int(m.group(2)) if m.group(2) else None
            cur["caps"].append((int(m.group(1), 16), ver, m.group(3)))
    return out


def _lspci_cap_id(name: str, extended: bool) -> int | None:
    for prefix, cap_id, ext in LSPCI_CAP_NAMES:
        if ext == extended and name.startswith(prefix):
            return cap_id
    m = re.match(r"Extended Capability ID (0x[0-9a-f]+)" if extended else r"#([0-9a-f]{2})", name)
    return int(m.group(1), 16) if m else None


def _real_addresses() -> list[str]:
    if not os.path.isdir(SYSFS):
        pytest.skip(f"{SYSFS} does not exist: no PCI bus is visible on this machine")
    names = sorted(os.listdir(SYSFS))
    if not names:
        pytest.skip(f"{SYSFS} is empty: this sandbox exposes no PCI functions to compare with")
    return names


def _lspci(*args: str, as_user: int | None = None) -> str:
    exe = shutil.which("lspci")
    if exe is None:
        pytest.skip("lspci is not installed (apt-get install pciutils; scripts/setup.sh does)")
    cmd = [exe, *args]
    if as_user is not None:
        cmd = ["setpriv", f"--reuid={as_user}", f"--regid={as_user}", "--clear-groups", *cmd]
    # lspci warns on stderr when it cannot load libkmod; only stdout is parsed.
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def _snapshot(seam: RealOS, addresses: list[str]) -> dict[str, dict[str, Any]]:
    """What our backend reads of each function: config bytes and capabilities (or 'denied')."""
    out: dict[str, dict[str, Any]] = {}
    for a in addresses:
        with SysfsPCIDevice(seam, a) as dev:
            cfg = dev.config()
            try:
                caps: Any = [(c.offset, c.id, c.extended, c.version) for c in dev.capabilities()]
            except ConfigAccessDenied:
                caps = "denied"
            out[a] = {"config": cfg.hex(), "caps": caps, "size": dev.config_size,
                      "ids": [dev.vendor_id, dev.device_id, dev.class_code, dev.revision]}
    return out


def _compare_with_lspci(ours_before: dict[str, Any], ours_after: dict[str, Any],
                        lspci: dict[str, dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    for addr, mine in ours_before.items():
        theirs = lspci.get(addr)
        if theirs is None:
            problems.append(f"{addr}: not in lspci's output")
            continue
        a, b = bytes.fromhex(mine["config"]), bytes.fromhex(ours_after[addr]["config"])
        ref = bytes(theirs["config"])
        if len(ref) != len(a):
            problems.append(f"{addr}: lspci dumped {len(ref)} config bytes, we read {len(a)}")
        # A byte that changed between our two reads (a live status bit) cannot be compared.
        for i in range(min(len(ref), len(a))):
            if a[i] == b[i] and a[i] != ref[i]:
                problems.append(f"{addr}: config byte {i:#05x}: ours {a[i]:#04x}, lspci "
                                f"{ref[i]:#04x}")
        if theirs["denied"] or mine["caps"] == "denied":
            if not (theirs["denied"] and mine["caps"] == "denied"):
                problems.append(f"{addr}: lspci denied={theirs['denied']}, ours={mine['caps']}")
            continue
        ours_caps = [tuple(c) for c in mine["caps"]]
        std = [c for c in ours_caps if not c[2]]
        ext = [c for c in ours_caps if c[2]]
        lspci_std = [c for c in theirs["caps"] if c[1] is None and c[0] < 0x100]
        lspci_ext = [c for c in theirs["caps"] if c[0] >= 0x100]
        has_exp = any(c[1] in (R.PCI_CAP_ID_EXP, R.PCI_CAP_ID_PCIX) for c in std)
        problems += _compare_caps(addr, std, lspci_std, ref, extended=False)
        # lspci walks the extended list only for PCI Express and PCI-X functions.
        if has_exp:
            problems += _compare_caps(addr, ext, lspci_ext, ref, extended=True)
    return problems


def _compare_caps(addr: str, ours: list[tuple[int, int, bool, int]],
                  theirs: list[tuple[int, int | None, str]], dump: bytes,
                  extended: bool) -> list[str]:
    problems = []
    if [c[0] for c in ours] != [c[0] for c in theirs]:
        return [f"{addr}: capability offsets ours {[hex(c[0]) for c in ours]}, lspci "
                f"{[hex(c[0]) for c in theirs]}"]
    for (off, cap_id, _, ver), (_, lver, name) in zip(ours, theirs):
        want = _lspci_cap_id(name, extended)
        if want is None:  # a name this table lacks: fall back to lspci's own dump
            want = (int.from_bytes(dump[off:off + 2], "little") if extended else dump[off])
        if cap_id != want:
            problems.append(f"{addr}: capability at {off:#x}: ours {cap_id:#x}, lspci {name!r}")
        if extended and ver != (lver or 0):
            problems.append(f"{addr}: capability at {off:#x}: version ours {ver}, lspci {lver}")
    return problems


def _as_user(uid: int, fn: Callable[[], Any]) -> Any:
    """Runs `fn` in a forked child that dropped to `uid` (all modules are already imported, so
    nothing needs reading from the root-only Python install), and returns its JSON result."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            payload = json.dumps({"ok": fn()})
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            payload = json.dumps({"error": repr(e)})
        with os.fdopen(w, "w") as f:
            f.write(payload)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    got = json.loads(data)
    assert "error" not in got, got
    return got["ok"]


# ---------------------------------------------------------------------------------------- real
def test_real_config_and_capabilities_match_lspci() -> None:
    addresses = _real_addresses()
    seam = RealOS()
    before = _snapshot(seam, addresses)
    lspci = _lspci_blocks(_lspci("-D", "-xxxx", "-vv"))
    after = _snapshot(seam, addresses)
    problems = _compare_with_lspci(before, after, lspci)
    assert not problems, "\n".join(problems)
    privileged = os.geteuid() == 0
    for addr, mine in before.items():
        # Root sees the whole config space (256 or 4096 bytes); others see the first 64.
        assert mine["size"] in ((256, 4096) if privileged else (64, 128)), (addr, mine["size"])


def test_real_ids_match_lspci_numeric() -> None:
    addresses = _real_addresses()
    text = _lspci("-D", "-n")
    seam = RealOS()
    seen = {}
    for line in text.splitlines():
        m = re.match(r"^(\S+) ([0-9a-f]{4}): ([0-9a-f]{4}):([0-9a-f]{4})"
                     r"(?: \(rev ([0-9a-f]{2})\))?", line)
        if m:
            seen[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16),
                                int(m.group(5) or "0", 16))
    assert sorted(seen) == addresses
    assert [str(a) for a in list_devices(seam)] == addresses
    for addr in addresses:
        with SysfsPCIDevice(seam, addr) as dev:
            assert (dev.class_code >> 8, dev.vendor_id, dev.device_id, dev.revision) == seen[addr]
            # and the sysfs text attributes agree with config space
            assert int(seam.read_sysfs(f"{SYSFS}/{addr}/vendor"), 16) == dev.vendor_id
            assert int(seam.read_sysfs(f"{SYSFS}/{addr}/device"), 16) == dev.device_id
            assert int(seam.read_sysfs(f"{SYSFS}/{addr}/class"), 16) == dev.class_code
            assert all(b.size_B >= 0 for b in dev.bars())


def test_real_unprivileged_view_matches_lspci() -> None:
    addresses = _real_addresses()
    if os.geteuid() != 0:
        pytest.skip("already unprivileged: test_real_config_and_capabilities_match_lspci covered "
                    "the 64-byte view")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is needed to run lspci as an unprivileged user")
    seam = RealOS()
    before = _as_user(NOBODY, lambda: _snapshot(seam, addresses))
    lspci = _lspci_blocks(_lspci("-D", "-xxxx", "-vv", as_user=NOBODY))
    after = _as_user(NOBODY, lambda: _snapshot(seam, addresses))
    problems = _compare_with_lspci(before, after, lspci)
    assert not problems, "\n".join(problems)
    for addr, mine in before.items():
        assert mine["size"] in (64, 128), (addr, mine["size"])
        # The header alone still tells whether there is a capability list to be denied.
        status = int.from_bytes(bytes.fromhex(mine["config"])[R.PCI_STATUS:R.PCI_STATUS + 2],
                                "little")
        assert (mine["caps"] == "denied") == bool(status & R.PCI_STATUS_CAP_LIST), addr


def test_real_list_cli_names_every_function() -> None:
    addresses = _real_addresses()
    out = subprocess.run([sys.executable, "-m", "runtime.drivers.pci", "list"], cwd=REPO,
                         check=True, capture_output=True, text=True).stdout
    heads = [line.split()[0] for line in out.splitlines() if line and not line[0].isspace()]
    assert heads == addresses
    seam = RealOS()
    for addr in addresses:
        with SysfsPCIDevice(seam, addr) as dev:
            assert f"{addr} " in out and f"[{dev.vendor_id:04x}:{dev.device_id:04x}]" in out
            try:
                for cap in dev.capabilities():
                    assert cap.name in out
            except ConfigAccessDenied:
                assert "<access denied>" in out


# ---------------------------------------------------------------------------------------- mock
@pytest.fixture()
def machine() -> tuple[Any, MockVfio]:
    return MockVfio.gpu_machine()


def test_mock_sysfs_ids_bars_and_extended_capabilities(machine: Any) -> None:
    mos, vfio = machine
    assert [str(a) for a in list_devices(mos)] == ["0000:03:00.0", "0000:03:00.1"]
    with SysfsPCIDevice(mos, "0000:03:00.0") as dev:
        assert (dev.vendor_id, dev.device_id, dev.class_code) == (0x1002, 0x744C, 0x030000)
        assert dev.revision == 0xC8 and dev.header_type == R.PCI_HEADER_TYPE_NORMAL
        assert dev.subsystem == (0x1002, 0x0E3B)
        assert dev.config_size == 4096 and dev.driver == "vfio-pci"
        caps = dev.capabilities()
        assert [(c.offset, c.name) for c in caps if not c.extended] == [
            (0x40, "PCI_CAP_ID_PM"), (0x50, "PCI_CAP_ID_EXP"), (0x90, "PCI_CAP_ID_MSI"),
            (0xB0, "PCI_CAP_ID_MSIX")]
        assert [(c.offset, c.name, c.version) for c in caps if c.extended] == [
            (0x100, "PCI_EXT_CAP_ID_VNDR", 1), (0x150, "PCI_EXT_CAP_ID_ERR", 2),
            (0x200, "PCI_EXT_CAP_ID_REBAR", 1), (0x270, "PCI_EXT_CAP_ID_SECPCI", 1),
            (0x2A0, "PCI_EXT_CAP_ID_ACS", 1), (0x320, "PCI_EXT_CAP_ID_LTR", 1),
            (0x400, "PCI_EXT_CAP_ID_DLF", 1)]
        assert dev.find_capability(R.PCI_EXT_CAP_ID_REBAR, extended=True) == Capability(
            0x200, R.PCI_EXT_CAP_ID_REBAR, True, 1)
        assert dev.find_capability(R.PCI_CAP_ID_SATA) is None
        bars = dev.bars()
        fn = vfio.functions["0000:03:00.0"]
        assert [(b.index, b.size_B) for b in bars] == [
            (0, 256 << 20), (1, 0), (2, 2 << 20), (3, 0), (4, 256), (5, 1 << 20)]
        assert bars[0].is_64bit and bars[0].prefetchable and bars[0].mappable
        assert bars[0].address == fn.bar_address[0] and bars[4].io and not bars[4].mappable
        assert not bars[5].is_64bit and not bars[5].prefetchable
        # The BAR registers in config space agree with the resource file.
        assert dev.read32(R.PCI_BASE_ADDRESS_5) & R.PCI_BASE_ADDRESS_MEM_MASK == bars[5].address
    assert iommu_group_of(mos, PCIAddress.parse("0000:03:00.1")) == 12
    assert [str(a) for a in iommu_group_devices(mos, 12)] == ["0000:03:00.0", "0000:03:00.1"]
    assert iommu_group_of(mos, PCIAddress.parse("0000:04:00.0")) is None


def test_mock_sysfs_write_and_map(machine: Any) -> None:
    mos, vfio = machine
    fn = vfio.functions["0000:03:00.0"]
    base = dict(mos.live_objects())
    dev = SysfsPCIDevice(mos, "0000:03:00.0", writable=True)
    # BAR sizing through config space, as firmware does it: all ones, read back, restore.
    old = dev.read32(R.PCI_BASE_ADDRESS_5)
    dev.write32(R.PCI_BASE_ADDRESS_5, 0xFFFFFFFF)
    assert dev.read32(R.PCI_BASE_ADDRESS_5) == (~((1 << 20) - 1)) & 0xFFFFFFFF
    dev.write32(R.PCI_BASE_ADDRESS_5, old)
    assert dev.read32(R.PCI_BASE_ADDRESS_5) == old
    dev.write16(R.PCI_VENDOR_ID, 0xDEAD)  # read-only: dropped, as hardware does
    assert dev.vendor_id == 0x1002
    dev.write16(R.PCI_COMMAND, R.PCI_COMMAND_MEMORY)
    assert dev.read16(R.PCI_COMMAND) == R.PCI_COMMAND_MEMORY
    regs = dev.map_bar(5)
    vram = dev.map_bar(0, 1 << 20, 8192, write_combine=False)
    assert regs.view is not None and vram.view is not None
    regs.view[0x100:0x104] = b"\x01\x02\x03\x04"
    assert bytes(fn.bar_memory[5][0x100:0x104]) == b"\x01\x02\x03\x04"
    fn.bar_memory[0][(1 << 20) + 8] = 0x5A
    assert vram.view[8] == 0x5A
    assert mos.live_objects()["mappings"] == base["mappings"] + 2
    assert mos.live_objects()["fds"] == base["fds"] + 1  # resourceN fds closed right after mmap
    dev.unmap(vram)
    with pytest.raises(PCIError, match="I/O port BAR"):
        dev.map_bar(4)
    with pytest.raises(PCIError, match="no BAR6"):
        dev.map_bar(6)
    with pytest.raises(PCIError, match="outside BAR5"):
        dev.map_bar(5, 1 << 20, 4096)
    with pytest.raises(PCIError, match="outside its 4096-byte"):
        dev.read_config(4094, 4)
    dev.close()
    dev.close()  # idempotent
    assert mos.live_objects() == base
    with pytest.raises(PCIError, match="closed"):
        dev.read_config(0, 4)


def test_mock_sysfs_unprivileged_view() -> None:
    mos, _ = MockVfio.gpu_machine(privileged=False)
    with SysfsPCIDevice(mos, "0000:03:00.0") as dev:
        assert dev.config_size == 64
        assert dev.vendor_id == 0x1002 and dev.class_code == 0x030000
        with pytest.raises(ConfigAccessDenied, match="needs root"):
            dev.capabilities()
        with pytest.raises(ConfigAccessDenied):
            dev.read8(0x40)
        with pytest.raises(PCIError, match="read-only"):
            dev.write16(R.PCI_COMMAND, 0)
        with pytest.raises(PCIError, match="needs root"):
            dev.map_bar(0)
    with pytest.raises(PCIError, match="needs root"):
        SysfsPCIDevice(mos, "0000:03:00.0", writable=True)
    with pytest.raises(PCIError, match="no PCI function 0000:09:00.0"):
        SysfsPCIDevice(mos, "0000:09:00.0")
    assert mos.live_objects()["fds"] == 0


def test_mock_list_cli(machine: Any) -> None:
    mos, _ = machine
    lines: list[str] = []
    ids = ("1002  Advanced Micro Devices, Inc. [AMD/ATI]\n"
           "\t744c  Navi 31 [Radeon RX 7900 XT/XTX]\n"
           "C 03  Display controller\n\t00  VGA compatible controller\n")
    mos.sysfs["/usr/share/misc/pci.ids"] = ids
    assert main(["list"], seam=mos, out=lines.append) == 0
    text = "\n".join(lines)
    assert ("0000:03:00.0 VGA compatible controller [0300]: Advanced Micro Devices, Inc. [AMD/ATI] "
            "Navi 31 [Radeon RX 7900 XT/XTX] [1002:744c] (rev c8)") in text
    assert "\tKernel driver in use: vfio-pci" in text
    assert "\tBAR0: memory at 0x8000000000 (64-bit, prefetchable) [size=256M]" in text
    assert "\tBAR4: I/O ports at 0xe000 [size=256]" in text
    assert "\tCapabilities: [b0] PCI_CAP_ID_MSIX" in text
    assert "\tCapabilities: [150 v2] PCI_EXT_CAP_ID_ERR" in text
    assert "0000:03:00.1 Class 0403 [0403]" in text  # a class pci.ids does not name
    lines.clear()
    assert main(["list", "0000:03:00.1"], seam=mos, out=lines.append) == 0
    assert lines[0].startswith("0000:03:00.1 ")
    assert main(["list", "--root", "/sys/nowhere"], seam=mos, out=lines.append) == 1
    with pytest.raises(SystemExit) as e:
        main(["frobnicate"], seam=mos)
    assert e.value.code == 2


# ---------------------------------------------------------------------------------------- walk
def _image(size: int = 256) -> bytearray:
    cfg = bytearray(size)
    cfg[R.PCI_STATUS] = R.PCI_STATUS_CAP_LIST
    return cfg


def test_walk_stops_at_loops_broken_ids_and_header_pointers() -> None:
    cfg = _image()
    cfg[R.PCI_CAPABILITY_LIST] = 0x43  # low bits are reserved: masked off
    cfg[0x40:0x42] = bytes([R.PCI_CAP_ID_PM, 0x50])
    cfg[0x50:0x52] = bytes([R.PCI_CAP_ID_MSI, 0x40])  # loops back
    assert [(c.offset, c.id) for c in walk_capabilities(bytes(cfg))] == [(0x40, 1), (0x50, 5)]
    cfg[0x51] = 0x60
    cfg[0x60:0x62] = bytes([0xFF, 0x70])  # an all-ones ID ends the list
    assert len(walk_capabilities(bytes(cfg))) == 2
    cfg[0x60:0x62] = bytes([R.PCI_CAP_ID_EXP, 0x10])  # a pointer into the header ends it
    assert [c.id for c in walk_capabilities(bytes(cfg))] == [1, 5, R.PCI_CAP_ID_EXP]
    cfg[R.PCI_STATUS] = 0  # no capability list at all
    assert walk_capabilities(bytes(cfg)) == []


def test_walk_cardbus_pointer_and_unknown_ids() -> None:
    cfg = _image()
    cfg[R.PCI_HEADER_TYPE] = 0x80 | R.PCI_HEADER_TYPE_CARDBUS  # multi-function bit ignored
    cfg[R.PCI_CB_CAPABILITY_LIST] = 0x80
    cfg[0x80:0x82] = bytes([0x3F, 0])
    (cap,) = walk_capabilities(bytes(cfg))
    assert cap.offset == 0x80 and cap.name == "PCI_CAP_ID_0x3f(unknown)"
    assert str(cap) == "[80] PCI_CAP_ID_0x3f(unknown)"


def test_walk_extended_list() -> None:
    cfg = _image(4096)
    cfg[R.PCI_STATUS] = 0
    cfg[0x100:0x104] = (R.PCI_EXT_CAP_ID_ERR | 2 << 16 | 0x180 << 20).to_bytes(4, "little")
    cfg[0x180:0x184] = (R.PCI_EXT_CAP_ID_DSN | 1 << 16 | 0x100 << 20).to_bytes(4, "little")
    caps = walk_capabilities(bytes(cfg))
    assert [(c.offset, c.name, c.version) for c in caps] == [
        (0x100, "PCI_EXT_CAP_ID_ERR", 2), (0x180, "PCI_EXT_CAP_ID_DSN", 1)]  # loop stopped
    cfg[0x180:0x184] = (R.PCI_EXT_CAP_ID_DSN | 1 << 16 | 0x0F0 << 20).to_bytes(4, "little")
    assert len(walk_capabilities(bytes(cfg))) == 2  # a next pointer below 0x100 ends it
    cfg[0x100:0x104] = b"\xff\xff\xff\xff"  # what an absent extended space reads as
    assert walk_capabilities(bytes(cfg)) == []
    # 256 bytes of image: no extended list is looked for
    assert walk_capabilities(bytes(cfg[:256])) == []


def test_walk_of_a_truncated_image_is_access_denied() -> None:
    cfg = _image()
    cfg[R.PCI_CAPABILITY_LIST] = 0x40
    with pytest.raises(ConfigAccessDenied, match="beyond the 64 config bytes"):
        walk_capabilities(bytes(cfg[:64]))
    with pytest.raises(ConfigAccessDenied):
        walk_capabilities(bytes(cfg[:32]))


def test_generated_name_tables() -> None:
    assert CAP_ID_NAMES[R.PCI_CAP_ID_MSIX] == "PCI_CAP_ID_MSIX"
    assert CAP_ID_NAMES[R.PCI_CAP_ID_EA] == "PCI_CAP_ID_EA"  # not the _MAX alias
    assert EXT_CAP_ID_NAMES[R.PCI_EXT_CAP_ID_DOE] == "PCI_EXT_CAP_ID_DOE"
    with pytest.raises(TypeError):
        CAP_ID_NAMES[0x99] = "x"  # type: ignore[index]


def test_pci_address_and_ids_parsing() -> None:
    a = PCIAddress.parse("0000:03:1f.7")
    assert (a.domain, a.bus, a.device, a.function, a.devfn) == (0, 3, 0x1F, 7, 0xFF)
    assert str(PCIAddress.parse("03:00.1")) == "0000:03:00.1"
    assert str(PCIAddress.parse("10000:00:00.0")) == "10000:00:00.0"  # VMD domains
    for bad in ("0000:03:20.0", "0000:03:00.8", "zz:00.0", "0000:100:00.0", "3.0"):
        with pytest.raises(ValueError, match="not a PCI address"):
            PCIAddress.parse(bad)
    ids = PciIds.parse("# comment\n1af4  Red Hat, Inc.\n\t1042  Virtio block\n\t\t1af4 1100  sub\n"
                       "C 01  Mass storage controller\n\t80  Mass storage controller\n"
                       "\t\t00  progif\nC 06  Bridge\n")
    assert ids.vendors == {0x1AF4: "Red Hat, Inc."}
    assert ids.devices == {(0x1AF4, 0x1042): "Virtio block"}
    assert ids.class_name(0x018000) == "Mass storage controller"
    assert ids.class_name(0x060400) == "Bridge" and ids.class_name(0x123400) == "Class 1234"


def test_mock_function_without_express_has_256_bytes() -> None:
    mos = MockOS()
    vfio = MockVfio(mos)
    vfio.add_function(MockPCIFunction("0000:00:1f.3", vendor_id=0x8086, device_id=0x1234,
                                      class_code=0x040300, express=False, msi_vectors=0), 3)
    with SysfsPCIDevice(mos, "0000:00:1f.3") as dev:
        assert dev.config_size == 256
        assert [c.name for c in dev.capabilities()] == ["PCI_CAP_ID_PM"]
        assert dev.bars() == [b for b in dev.bars() if b.size_B == 0]
