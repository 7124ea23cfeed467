"""PyTorch SDPA forward reference numbers (FlashAttention-2 and cuDNN backends) on the same shapes
as `att perf`: B*S = 16k tokens, hidden 2048 (H = 2048/D), bf16, [B, H, S, D] contiguous.
TFLOP/s = 4 B H S^2 D (halved when causal) over the median of 15 event-timed calls."""
import torch
from torch.nn.attention import sdpa_kernel, SDPBackend
import torch.nn.functional as F

rows = []
for D in (64, 128, 256):
    for causal in (False, True):
        line = f"D={D:<3} {'causal' if causal else 'full  '}"
        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            line += f" {name}:"
            for S in (512, 2048, 8192):
                B, H = 16384 // S, 2048 // D
                q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                try:
                    with sdpa_kernel([be]):
                        for _ in range(3):
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                        ts = []
                        for _ in range(15):
                            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            e0.record()
                            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                            e1.record()
                            torch.cuda.synchronize()
                            ts.append(e0.elapsed_time(e1))
                    ts.sort()
                    ms = ts[len(ts) // 2]
                    tf = 4 * B * H * S * S * D * (0.5 if causal else 1.0) / ms / 1e9
                    line += f" S={S} {tf:6.1f}"
                except Exception as ex:  # backend refuses the shape
                    line += f" S={S}    n/a"
        rows.append(line)
print("---- SDPA TFLOP/s (torch %s, %s)" % (torch.__version__, torch.cuda.get_device_name()))
print("\n".join(rows))
