"""The GPU's SM clock, power draw and clock throttle reasons while something runs, sampled through
NVML with ctypes (libnvidia-ml.so.1, which comes with the driver: no package needed). The summary
is the one `mlpc bench` reports (runtime/measure/gpu_monitor.h), so the harness shows both sides'
clocks: a stream of large GEMMs is power-bound on the GPU machine, and two runs of the same work
differ with the clock the GPU held.

    with Monitor() as m:
        run()
    m.summary  # {"samples", "sm_mhz_mean", ..., "power_capped", "thermal"} or {"unavailable": why}
"""
import ctypes, threading, time

POWER_CAP = 0x4                     # NVML's SW power cap throttle reason
THERMAL = 0x8 | 0x20 | 0x40 | 0x80  # HW slowdown, SW thermal, HW thermal, HW power brake
CLOCK_SM = 1
POWER_INSTANT = 186                 # NVML_FI_DEV_POWER_INSTANT (mW); plain power is a 1 s average


class FieldValue(ctypes.Structure):  # nvmlFieldValue_t
    _fields_ = [("fieldId", ctypes.c_uint32), ("scopeId", ctypes.c_uint32),
                ("timestamp", ctypes.c_int64), ("latencyUsec", ctypes.c_int64),
                ("valueType", ctypes.c_uint), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_uint64)]


def summarize(samples, max_sm_mhz, power_limit_mw):
    """samples: (sm_mhz, power_mw, reasons[, power_instant]) tuples."""
    if not samples:
        return {"unavailable": "no samples"}
    n = len(samples)
    clocks = [s[0] for s in samples]
    return {"samples": n, "sm_mhz_mean": sum(clocks) / n, "sm_mhz_min": min(clocks),
            "sm_mhz_max": max(clocks), "max_sm_mhz": max_sm_mhz,
            "power_w_mean": sum(s[1] for s in samples) / n / 1000,
            "power_limit_w": power_limit_mw / 1000,
            "power_reading": "instant" if all(s[3] if len(s) > 3 else True for s in samples)
                             else "1 s average",
            "power_capped": sum(1 for s in samples if s[2] & POWER_CAP) / n,
            "thermal": sum(1 for s in samples if s[2] & THERMAL) / n}


def describe(g):
    """One short cell: "1410 MHz, 688 W, cap 94%", or why there is none."""
    if "unavailable" in g:
        return g["unavailable"]
    avg = " (1 s avg)" if g.get("power_reading") == "1 s average" else ""
    text = f"{g['sm_mhz_mean']:.0f} MHz, {g['power_w_mean']:.0f} W{avg}, cap {100 * g['power_capped']:.0f}%"
    return text + (f", thermal {100 * g['thermal']:.0f}%" if g.get("thermal") else "")


class Monitor:
    """Samples device `index` (NVML's numbering: PCI order) every period_s on a thread."""

    def __init__(self, index=0, period_s=0.002):
        self.period_s, self.samples, self.summary = period_s, [], None
        self.unavailable = None
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            self._check(self.lib.nvmlInit_v2(), "nvmlInit_v2")
            self.dev = ctypes.c_void_p()
            self._check(self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.dev)),
                        "nvmlDeviceGetHandleByIndex_v2")
            mhz, mw = ctypes.c_uint(0), ctypes.c_uint(0)
            self.lib.nvmlDeviceGetMaxClockInfo(self.dev, CLOCK_SM, ctypes.byref(mhz))
            self.lib.nvmlDeviceGetEnforcedPowerLimit(self.dev, ctypes.byref(mw))
            self.max_sm_mhz, self.power_limit_mw = mhz.value, mw.value
        except (OSError, RuntimeError) as e:
            self.unavailable = f"no NVML ({e})"

    @staticmethod
    def _check(r, call):
        if r != 0:
            raise RuntimeError(f"{call} returned {r}")

    def _run(self):
        mhz, mw, reasons = ctypes.c_uint(0), ctypes.c_uint(0), ctypes.c_ulonglong(0)
        field = FieldValue()
        while not self.stop.is_set():
            if self.lib.nvmlDeviceGetClockInfo(self.dev, CLOCK_SM, ctypes.byref(mhz)) == 0:
                field.fieldId, field.nvmlReturn = POWER_INSTANT, -1
                instant = (self.lib.nvmlDeviceGetFieldValues(self.dev, 1, ctypes.byref(field)) == 0
                           and field.nvmlReturn == 0)
                if instant:
                    power = field.value & 0xFFFFFFFF  # the union's unsigned int member
                else:
                    self.lib.nvmlDeviceGetPowerUsage(self.dev, ctypes.byref(mw))
                    power = mw.value
                self.lib.nvmlDeviceGetCurrentClocksThrottleReasons(self.dev, ctypes.byref(reasons))
                self.samples.append((mhz.value, power, reasons.value, instant))
            time.sleep(self.period_s)

    def __enter__(self):
        if self.unavailable is None:
            self.stop = threading.Event()
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.unavailable is None:
            self.stop.set()
            self.thread.join()
            self.summary = summarize(self.samples, self.max_sm_mhz, self.power_limit_mw)
        else:
            self.summary = {"unavailable": self.unavailable}
        return False
