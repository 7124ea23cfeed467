"""The timing method of the PyTorch reference scripts in bench/ (DESIGN.md section 5),
in one place: warm-up calls, then timed calls with CUDA events, each after an
untimed fill of a large buffer; the median is reported.

The fill evicts L2 (its size is several times the largest L2 there is), so each
timed call starts with none of its data cached, like ours after the 256 MiB
memset of `camel bench`. It also keeps the GPU busy while Python issues the
timed work, so that the time measured is the device's and not Python's launch
latency: make it large enough to outlast the launches of one timed call.

    from torch_timing import Timer
    timer = Timer(flush_bytes=1 << 30)
    ms = timer.median_ms(lambda: f(x), reps=20)
"""
import statistics


class Timer:
    def __init__(self, flush_bytes=256 << 20, warmup=3, device="cuda"):
        import torch

        self.torch = torch
        self.warmup = warmup
        self.flush = torch.empty(flush_bytes, dtype=torch.uint8, device=device)
        self.start = torch.cuda.Event(enable_timing=True)
        self.stop = torch.cuda.Event(enable_timing=True)

    def times_ms(self, fn, reps):
        """fn() `warmup` times untimed, then `reps` timed calls; the list of their milliseconds."""
        for _ in range(self.warmup):
            fn()
        times = []
        for i in range(reps):
            self.flush.fill_(i & 0xFF)
            self.start.record()
            fn()
            self.stop.record()
            self.stop.synchronize()
            times.append(self.start.elapsed_time(self.stop))
        return times

    def median_ms(self, fn, reps):
        return statistics.median(self.times_ms(fn, reps))
