import sys, time
sys.path.insert(0, ".")
import numpy as np
from runtime.drivers.nv.device import NVDevice
import runtime.hcq.device as D
dev = NVDevice("nv:0")
n = 1 << 20
vram = dev.alloc(n)
page = np.ones(n, np.uint8)
st = dev._staging_bufs()[0][0]
sv = st.cpu_view()[:n]
pv = memoryview(page)
def best(f, r=30):
    out = []
    for _ in range(r):
        dev.synchronize(); t = time.perf_counter(); f(); dev.synchronize(); out.append(time.perf_counter() - t)
    return min(out) * 1e6, sorted(out)[len(out)//2] * 1e6
print("memcpy 1 MiB into staging: %.1f / %.1f us" % best(lambda: sv.__setitem__(slice(None), pv)))
print("np.copyto 1 MiB: %.1f / %.1f us" % best(lambda: np.copyto(np.frombuffer(sv, np.uint8), page)))
from runtime.hcq.device import host_stream_copy
sc = host_stream_copy()
print("stream copy 1 MiB: %.1f / %.1f us" % best(lambda: sc(sv, pv)))
print("DMA 1 MiB from staging: %.1f / %.1f us" % best(lambda: dev._submit_copy(vram.va, st.va, n)))
for pieces in (1, 2, 4, 8, 16):
    D._PIPELINE_MIN_B = n // pieces
    dev._copy_chunk = (lambda k: (lambda m: max(n // k, 4096)))(pieces)
    print("copyin 1 MiB in %2d pieces: %.1f / %.1f us" % ((pieces,) + best(lambda: dev.copyin(vram, page))))
dev.close()
