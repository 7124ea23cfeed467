"""Session 15: what cuDNN's SDPA runs for issue 6's last forward miss (D = 256 causal S = 512, B 32, H 8, bf16,
[B, H, S, D]): a few warm calls, then one call under `ncu` (launch statistics and occupancy of every kernel of it)
-- grid, block, registers, shared memory and waves tell its tile shape and whether it is persistent.
   ncu --section LaunchStats --section Occupancy --section SpeedOfLight python3 dev/attention_sm90/cudnn_probe.py"""
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel, SDPBackend

B, H, S, D = 32, 8, 512, 256
q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for be in (SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
    with sdpa_kernel([be]):
        for _ in range(3):
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(str(be))
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
print("done")
